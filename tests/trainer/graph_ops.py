"""Every op of a traced TensorFlow graph, including the functions its ops call (loop bodies, branches)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_FUNCTION_ATTRS = ("f", "body", "cond", "then_branch", "else_branch")


def all_ops(graph: Any) -> Iterator[Any]:
    for op in graph.get_operations():
        yield op
        for attr in _FUNCTION_ATTRS:
            try:
                fn = op.get_attr(attr)
            except (ValueError, TypeError):
                continue
            sub = graph._get_function(fn.name) if hasattr(fn, "name") else None
            if sub is not None:
                yield from all_ops(sub.graph)
