"""The walls between the three packages, read from their source (every import, also inside functions):
the operator and the trainer meet only in ``tfps_wire``, and ``tfps_wire`` depends on neither nor on
anything heavier than pydantic."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "tfps_operator": ROOT / "operator" / "tfps_operator",
    "tfps_trainer": ROOT / "trainer_image" / "tfps_trainer",
    "tfps_wire": ROOT / "wire" / "tfps_wire",
}


def _module(path: Path, package: str) -> str:
    rel = path.relative_to(PACKAGES[package]).with_suffix("")
    parts = [package, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imported_modules(package: str) -> dict[str, set[str]]:
    """{module: every module it imports, absolute, relative ones resolved, also inside functions; ``from
    package import name`` counts as ``package.name``}."""
    out: dict[str, set[str]] = {}
    for path in PACKAGES[package].rglob("*.py"):
        mod = _module(path, package)
        here = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([base] if base else [])])
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        out[mod] = found
    return out


def _imports(package: str) -> dict[str, set[str]]:
    """{module: top-level packages it imports}."""
    return {m: {n.split(".")[0] for n in names} for m, names in _imported_modules(package).items()}


@pytest.mark.parametrize(
    ("package", "forbidden"), [("tfps_operator", "tfps_trainer"), ("tfps_trainer", "tfps_operator")]
)
def test_operator_and_trainer_meet_only_in_wire(package: str, forbidden: str) -> None:
    offenders = sorted(f for f, names in _imports(package).items() if forbidden in names)
    assert not offenders, f"{package} imports {forbidden} in {offenders}: put the shared message in tfps_wire"


def test_wire_imports_only_the_standard_library_and_pydantic() -> None:
    allowed = set(sys.stdlib_module_names) | {"pydantic", "pydantic_core", "tfps_wire"}
    offenders = {f: sorted(n - allowed) for f, n in _imports("tfps_wire").items() if n - allowed}
    assert not offenders, offenders


def test_the_operator_process_imports_none_of_the_user_tools():
    graph = _imported_modules("tfps_operator")
    offenders = sorted(
        m
        for m, names in graph.items()
        if not m.startswith("tfps_operator.tools")
        and any(n == "tfps_operator.tools" or n.startswith("tfps_operator.tools.") for n in names)
    )
    assert offenders == ["tfps_operator.__main__"], offenders  # `python -m tfps_operator` is the CLI's


def test_no_import_circle_among_the_user_tools():
    graph = {
        m: {n for n in names if n in _imported_modules("tfps_operator") and n != m}
        for m, names in _imported_modules("tfps_operator").items()
        if m.startswith("tfps_operator.tools")
    }

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for n in graph.get(todo.pop(), ()):
                if n == goal:
                    return True
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return False

    # a package importing its own submodules (lazily, from __init__) is not a circle
    circles = sorted(
        (a, b)
        for a, deps in graph.items()
        for b in deps
        if a < b and not b.startswith(a + ".") and not a.startswith(b + ".") and reaches(b, a)
    )
    assert not circles, circles
