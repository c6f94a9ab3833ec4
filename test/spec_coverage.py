"""Coverage of the behaviour catalogues in ``docs/behaviour`` by the ``# spec:`` markers of ``test/``.

A test that covers a catalogue scenario says so with a comment ``# spec: AREA ID [ID ...]``:
``# spec: trainer B12``, ``# spec: jobset 6.V.3``, ``# spec: scheduling 48``. Ids may be separated
by commas or spaces, and ``H1-H7`` (also written with an en dash) names a range within one group.
The catalogue of each area is the numbered section of its document: ``docs/behaviour/trainer.md`` §10 (lines
``A1. `` ... ``M2. ``), ``docs/behaviour/jobset.md`` §6 (groups ``### 6.A`` ... of ``1. `` lines, cited
as ``6.A.1``) and ``docs/behaviour/scheduling.md`` §7 (lines ``1. `` ...). The format is line-based
and kept stable (see docs/behaviour/README.md), so a plain grep finds any id.

usage: python3 test/spec_coverage.py [AREA ...] [--list] [--min PCT]   (``make spec-coverage``)
Prints, per area, how many scenarios at least one marker names, the missing ids with ``--list``,
and every marker id that names no scenario (an error: exit status 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "behaviour"
TESTS = ROOT / "test"
AREAS = ("trainer", "jobset", "scheduling")

_MARKER = re.compile(r"spec:\s*(" + "|".join(AREAS) + r")\b([^\n#/(]*)")
_RANGE = re.compile(r"^([A-Z]?|6\.[A-Z]\.)(\d+)[-\u2013]\1?(\d+)$")


@dataclasses.dataclass(frozen=True)
class Marker:
    path: pathlib.Path
    line: int
    area: str
    ids: tuple[str, ...]
    text: str


def natural_key(scenario: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", scenario)]


# The catalogue of each document is one numbered section: trainer.md §10 (lines ``A1. `` ...),
# jobset.md §6 (``### 6.A`` groups of ``1. `` lines) and scheduling.md §7 (``1. `` lines).
CATALOGUE_SECTION = {"trainer": "10", "jobset": "6", "scheduling": "7"}


def catalogue(area: str, docs: pathlib.Path = DOCS) -> list[str]:
    """The scenario ids of an area's catalogue section, in natural order; a duplicate is an error."""
    text = (docs / f"{area}.md").read_text()
    number = CATALOGUE_SECTION[area]
    start = re.search(rf"^## {number}\. ", text, re.MULTILINE)
    if start is None:
        raise ValueError(f"docs/behaviour/{area}.md has no catalogue section '## {number}.'")
    end = re.search(r"^## ", text[start.end() :], re.MULTILINE)
    body = text[start.end() : start.end() + end.start() if end else len(text)]
    ids: list[str] = []
    group = ""
    for line in body.splitlines():
        heading = re.match(r"### 6\.([A-Z]) ", line)
        if area == "jobset" and heading:
            group = heading.group(1)
            continue
        if area == "trainer":
            m = re.match(r"([A-M]\d+)\. ", line)
            if m:
                ids.append(m.group(1))
        else:
            m = re.match(r"(\d+)\. ", line)
            if m and (area == "scheduling" or group):
                ids.append(f"6.{group}.{m.group(1)}" if area == "jobset" else m.group(1))
    duplicates = sorted({i for i in ids if ids.count(i) > 1}, key=natural_key)
    if duplicates:
        raise ValueError(f"docs/behaviour/{area}.md numbers these scenarios twice: {' '.join(duplicates)}")
    return sorted(ids, key=natural_key)


def _expand(token: str) -> list[str] | None:
    """``H1-H3`` -> H1 H2 H3; a plain id -> itself; anything else -> None (not an id)."""
    m = _RANGE.match(token)
    if m:
        prefix, first, last = m.group(1), int(m.group(2)), int(m.group(3))
        if first <= last:
            return [f"{prefix}{n}" for n in range(first, last + 1)]
        return None
    return [token] if re.fullmatch(r"[A-Z]?\d+|6\.[A-Z]\.\d+", token) else None


def markers(tests: pathlib.Path = TESTS) -> list[Marker]:
    """Every ``spec: AREA ...`` marker under ``tests``; ids are the leading run of id tokens."""
    found: list[Marker] = []
    for path in sorted(tests.rglob("*.py")):
        if path.resolve() == pathlib.Path(__file__).resolve():
            continue  # this module's own examples are not markers
        text = path.read_text(errors="replace")
        for m in _MARKER.finditer(text):
            ids: list[str] = []
            for token in re.split(r"[,\s]+", m.group(2).strip()):
                expanded = _expand(token.rstrip(".;:"))
                if expanded is None:
                    break
                ids.extend(expanded)
            line = text.count("\n", 0, m.start()) + 1
            found.append(Marker(path, line, m.group(1), tuple(ids), m.group(0).strip()))
    return found


@dataclasses.dataclass(frozen=True)
class Coverage:
    area: str
    scenarios: list[str]
    referenced: set[str]
    unknown: list[Marker]  # markers naming an id the catalogue lacks, or naming no id at all

    @property
    def missing(self) -> list[str]:
        return [i for i in self.scenarios if i not in self.referenced]

    @property
    def covered(self) -> int:
        return len(self.scenarios) - len(self.missing)

    def figure(self) -> str:
        pct = 100.0 * self.covered / max(1, len(self.scenarios))
        return f"{self.area}: {self.covered}/{len(self.scenarios)} scenarios referenced by tests ({pct:.0f}%)"


def coverage(area: str, docs: pathlib.Path = DOCS, tests: pathlib.Path = TESTS) -> Coverage:
    scenarios = catalogue(area, docs)
    known = set(scenarios)
    referenced: set[str] = set()
    unknown: list[Marker] = []
    for marker in markers(tests):
        if marker.area != area:
            continue
        referenced.update(marker.ids)
        if not marker.ids or any(i not in known for i in marker.ids):
            unknown.append(marker)
    return Coverage(area, scenarios, referenced, unknown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("areas", nargs="*", metavar="AREA", help=f"any of {', '.join(AREAS)} (default: all)")
    parser.add_argument("--list", action="store_true", help="print the ids no test references")
    parser.add_argument("--min", type=float, default=0.0, help="fail below this percentage")
    args = parser.parse_args(argv)
    unknown_areas = [a for a in args.areas if a not in AREAS]
    if unknown_areas:
        parser.error(f"unknown area {unknown_areas[0]!r}: choose from {', '.join(AREAS)}")
    status = 0
    for area in args.areas or AREAS:
        cov = coverage(area)
        if args.list and cov.missing:
            print(f"{area} missing: {' '.join(cov.missing)}")
        for marker in cov.unknown:
            bad = [i for i in marker.ids if i not in set(cov.scenarios)] or ["(no id)"]
            rel = marker.path.relative_to(ROOT) if marker.path.is_relative_to(ROOT) else marker.path
            print(
                f"{rel}:{marker.line}: {marker.text!r} names {' '.join(bad)}, not in docs/behaviour/{area}.md"
            )
            status = 1
        print(cov.figure())
        if 100.0 * cov.covered / max(1, len(cov.scenarios)) < args.min:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
