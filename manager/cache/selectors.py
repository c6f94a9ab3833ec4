"""Label selectors: parsing the string form and matching label maps, as apimachinery does.

Supported: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists),
``!k`` (does not exist), comma-separated (AND). ``from_label_selector`` converts a
``metav1.LabelSelector`` dict (matchLabels/matchExpressions).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from manager.errors import Error
from manager.meta.object import Json

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]


class SelectorError(Error, ValueError):
    """The selector text or structure is malformed."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match when the key is absent, as in apimachinery
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def equality_pairs(self) -> dict[str, str]:
        """The ``k=v`` requirements (usable for index lookups)."""
        return {
            r.key: next(iter(r.values)) for r in self.requirements if r.operator == "=" and len(r.values) == 1
        }


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


def _split(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise SelectorError(f"unbalanced '(' in {text!r}")
    parts.append("".join(current))
    return parts


def _values(raw: str, text: str) -> frozenset[str]:
    values = frozenset(v.strip() for v in raw.split(","))
    for v in values:
        if not _VALUE_RE.match(v):
            raise SelectorError(f"invalid label value {v!r} in {text!r}")
    return values


def parse(text: str) -> Selector:
    """Parse a selector string; the empty string selects everything."""
    if not text.strip():
        return Selector()
    requirements: list[Requirement] = []
    for part in _split(text):
        if m := _SET_RE.match(part):
            op: Operator = "in" if m.group(3) == "in" else "notin"
            requirements.append(Requirement(m.group(1), op, _values(m.group(4), text)))
        elif m := _EQ_RE.match(part):
            op = "!=" if m.group(3) == "!=" else "="
            requirements.append(Requirement(m.group(1), op, frozenset([m.group(4)])))
        elif m := _EXISTS_RE.match(part):
            requirements.append(Requirement(m.group(2), "!" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"cannot parse selector requirement {part.strip()!r} in {text!r}")
    return Selector(tuple(requirements))


def from_labels(labels: Mapping[str, str]) -> Selector:
    return Selector(tuple(Requirement(k, "=", frozenset([v])) for k, v in sorted(labels.items())))


def from_label_selector(selector: Json | None) -> Selector:
    """A ``metav1.LabelSelector`` dict; ``None`` or ``{}`` selects everything."""
    if not selector:
        return Selector()
    reqs = list(from_labels(selector.get("matchLabels") or {}).requirements)
    ops: dict[str, Operator] = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            raise SelectorError(f"unknown operator {expr.get('operator')!r}")
        values = frozenset(expr.get("values") or [])
        if op in ("in", "notin") and not values:
            raise SelectorError(f"operator {expr['operator']} needs values")
        reqs.append(Requirement(expr["key"], op, values))
    return Selector(tuple(reqs))


def to_selector(selector: str | Mapping[str, str] | Selector | None) -> Selector:
    if selector is None:
        return Selector()
    if isinstance(selector, Selector):
        return selector
    if isinstance(selector, str):
        return parse(selector)
    return from_labels(selector)
