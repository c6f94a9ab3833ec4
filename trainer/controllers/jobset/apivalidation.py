"""Kubernetes validation texts (k8s.io/apimachinery v0.34) that webhook messages embed verbatim.

Only what the JobSet webhooks need: DNS names, domain-prefixed paths and ``field.Error``
formatting, with the exact wording users see in a denial.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trainer.api import gocodec

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"

_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = re.compile(f"^{DNS1035_LABEL_FMT}$")
_HTTP_PATH = re.compile(f"^{HTTP_PATH_FMT}$")


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError, including its odd ``'a',  or 'b', `` example spacing."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character",
                DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1035_LABEL.match(value):
        errs.append(
            regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character",
                DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def _value_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def invalid(path: str, value: Any, detail: str, *, go_type: gocodec.GoType | None = None) -> str:
    """``field.Invalid(path, value, detail).Error()``; with ``go_type`` a complex value is
    written as ``json.Marshal`` of the typed Go value (field order, zero fields), as Go does."""
    text = _value_text(value)
    if go_type is not None and isinstance(value, dict | list):
        text = gocodec.marshal(value, go_type)
    return f"{path}: Invalid value: {text}: {detail}"


def required(path: str) -> str:
    return f"{path}: Required value"


def too_long(path: str, max_length: int) -> str:
    return f"{path}: Too long: may not be more than {max_length} bytes"


def is_domain_prefixed_path(path: str, value: str) -> list[str]:
    if not value:
        return [required(path)]
    segments = value.split("/", 1)
    if len(segments) != 2 or not segments[0] or not segments[1]:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    host, rest = segments
    errs = [invalid(path, host, msg) for msg in is_dns1123_subdomain(host)]
    if not _HTTP_PATH.match(rest):
        errs.append(invalid(path, rest, regex_error("Invalid path", HTTP_PATH_FMT)))
    return errs


def aggregate(errors: list[str]) -> str:
    """``ErrorList.ToAggregate().Error()``: one error as itself, several as ``[e1, e2]``."""
    if len(errors) == 1:
        return errors[0]
    return "[" + ", ".join(errors) + "]"
