"""Name validation (k8s.io/apimachinery/pkg/util/validation v0.34), with the texts denials embed.

``is_*`` return Go's messages (empty when valid); ``is_domain_prefixed_path`` returns field
errors, as its Go counterpart does.
"""

from __future__ import annotations

import re

from manager.meta.field import FieldError

__all__ = [
    "DNS1035_LABEL_FMT",
    "DNS1123_LABEL_FMT",
    "DNS1123_SUBDOMAIN_FMT",
    "is_dns1035_label",
    "is_dns1123_subdomain",
    "is_domain_prefixed_path",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
]

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"

LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")
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


def is_domain_prefixed_path(path: str, value: str) -> list[FieldError]:
    if not value:
        return [FieldError.required(path)]
    segments = value.split("/", 1)
    if len(segments) != 2 or not segments[0] or not segments[1]:
        return [FieldError.invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    host, rest = segments
    errs = [FieldError.invalid(path, host, msg) for msg in is_dns1123_subdomain(host)]
    if not _HTTP_PATH.match(rest):
        errs.append(FieldError.invalid(path, rest, regex_error("Invalid path", HTTP_PATH_FMT)))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``: at most 63 characters, alphanumeric at both ends."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE.match(value):
        errs.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs
