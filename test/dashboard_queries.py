"""The shipped Grafana dashboards' PromQL, reduced to the metric names it reads (test helper)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = sorted((ROOT / "config" / "grafana").glob("*.json"))

# PromQL words that are not metric names (aggregations, functions, keywords).
_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values",
    "inf", "nan",
}  # fmt: skip
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows keep their panels inside


def queries(paths: Iterable[Path] = DASHBOARDS) -> Iterator[tuple[str, str, str]]:
    """(dashboard file, panel title, expr) for every query of every panel and template variable."""
    for path in paths:
        dashboard = json.loads(path.read_text())
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                yield path.name, panel.get("title", ""), target["expr"]
        for var in dashboard.get("templating", {}).get("list", []):
            if var.get("type") == "query":
                query = var["query"] if isinstance(var["query"], str) else var["query"].get("query", "")
                inner = re.fullmatch(r"label_values\((.*),\s*[a-zA-Z_]+\)", query)
                yield path.name, f"variable {var['name']}", inner.group(1) if inner else query


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (labels, functions, ranges and strings removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range selectors and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\{?[a-zA-Z_]+\}?", " ", text)  # Grafana variables
    names = set()
    for match in _IDENT.finditer(text):
        word = match.group(0)
        rest = text[match.end() :].lstrip()
        if rest.startswith("("):  # a function call
            continue
        if word.lower() in _KEYWORDS or re.fullmatch(r"\d.*", word):
            continue
        names.add(word)
    return names


def exported_series_names(exposition: str) -> set[str]:
    """Every series name a Prometheus text exposition can produce, whether or not it has samples yet."""
    out: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        out.add(family.name)
        if family.type == "counter":
            out.add(family.name + "_total")
        elif family.type == "histogram":
            out.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        elif family.type == "summary":
            out.update(family.name + suffix for suffix in ("_sum", "_count"))
        out.update(sample.name for sample in family.samples)
    return out
