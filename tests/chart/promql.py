"""Metric and label names a PromQL expression uses (enough of PromQL for the chart's dashboard and alerts)."""

from __future__ import annotations

import re

KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")


def names(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """({metric: labels its selectors match on}, labels used in by/on/without clauses)."""
    expr = re.sub(r"\$\{?\w+\}?", "1m", expr)  # Grafana variables ($__rate_interval, $namespace)
    matchers = _STRING.sub('""', expr)
    metrics: dict[str, set[str]] = {}
    for m in _SELECTOR.finditer(matchers):
        if m.group(1) and m.group(1) not in KEYWORDS:
            metrics.setdefault(m.group(1), set()).update(_MATCHER.findall(m.group(2)))
    grouping = {label.strip() for g in _GROUPING.finditer(matchers) for label in g.group(2).split(",") if label.strip()}
    bare = _GROUPING.sub(" ", matchers)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    for ident in re.findall(r"(?<![\w.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", bare):
        if ident not in KEYWORDS:
            metrics.setdefault(ident, set())
    return metrics, grouping
