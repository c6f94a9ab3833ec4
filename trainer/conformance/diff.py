"""Object-by-object comparison with JSON paths, and the listed divergences that excuse some."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DIVERGENCES_FILE = Path(__file__).with_name("divergences.yaml")
MISSING = "<absent>"


@dataclass(frozen=True)
class Difference:
    """One difference: where (``scenario: Kind/name .json.path``), and both values."""

    scenario: str
    key: str
    path: str
    ours: Any
    theirs: Any

    @property
    def where(self) -> str:
        return f"{self.scenario}: {self.key} {self.path or '.'}"

    def render(self) -> str:
        def show(value: Any) -> str:
            return value if value == MISSING else json.dumps(value, sort_keys=True)

        return f"{self.where}\n    ours:   {show(self.ours)}\n    theirs: {show(self.theirs)}"


def _index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def _member(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{path}[{json.dumps(key)}]"


def compare_values(ours: Any, theirs: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf where the two values differ, as (JSON path, ours, theirs)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(ours) | set(theirs)):
            sub = _member(path, key)
            if key not in ours:
                out.append((sub, MISSING, theirs[key]))
            elif key not in theirs:
                out.append((sub, ours[key], MISSING))
            else:
                out += compare_values(ours[key], theirs[key], sub)
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        out = []
        for i in range(max(len(ours), len(theirs))):
            if i >= len(ours):
                out.append((_index(path, i), MISSING, theirs[i]))
            elif i >= len(theirs):
                out.append((_index(path, i), ours[i], MISSING))
            else:
                out += compare_values(ours[i], theirs[i], _index(path, i))
        return out
    return [] if ours == theirs else [(path, ours, theirs)]


def compare(scenario: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[Difference]:
    """Compare two keyed collections (``Kind/name`` -> object) object by object."""
    diffs = []
    for key in sorted(set(ours) | set(theirs)):
        if key not in ours:
            diffs.append(Difference(scenario, key, "", MISSING, "<present>"))
        elif key not in theirs:
            diffs.append(Difference(scenario, key, "", "<present>", MISSING))
        else:
            for path, a, b in compare_values(ours[key], theirs[key]):
                diffs.append(Difference(scenario, key, path, a, b))
    return diffs


@dataclass(frozen=True)
class Divergence:
    """A listed, deliberate difference: an id of docs/divergences.md and what it excuses."""

    id: str
    where: str  # fnmatch pattern over Difference.where
    reason: str = ""
    ours: Any = None
    """When set, only a difference where our side has exactly this value is excused
    (``<absent>``: ours has no such object or field), so a one-sided divergence cannot hide the
    other side's."""
    theirs: Any = None
    """The same for the Go side."""

    def excuses(self, diff: Difference) -> bool:
        return (
            fnmatch.fnmatchcase(diff.where, self.where)
            and (self.ours is None or diff.ours == self.ours)
            and (self.theirs is None or diff.theirs == self.theirs)
        )


def load_divergences(path: Path = DIVERGENCES_FILE) -> list[Divergence]:
    data = yaml.safe_load(path.read_text()) or {}
    entries = data.get("divergences") or []
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("id") or not entry.get("where"):
            raise ValueError(f"{path}: every divergence needs an id and a where pattern, got {entry!r}")
        for pattern in entry["where"] if isinstance(entry["where"], list) else [entry["where"]]:
            out.append(
                Divergence(
                    str(entry["id"]),
                    str(pattern),
                    str(entry.get("reason", "")),
                    ours=entry.get("ours"),
                    theirs=entry.get("theirs"),
                )
            )
    return out


def classify(
    diffs: list[Difference], divergences: list[Divergence]
) -> tuple[list[Difference], list[tuple[Difference, str]]]:
    """(unlisted differences, listed ones with the id excusing each)."""
    unlisted, listed = [], []
    for diff in diffs:
        match = next((d for d in divergences if d.excuses(diff)), None)
        if match is None:
            unlisted.append(diff)
        else:
            listed.append((diff, match.id))
    return unlisted, listed
