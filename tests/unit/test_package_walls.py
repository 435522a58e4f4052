"""The walls between the three packages, read from their source (every import, also inside functions):
the operator and the trainer meet only in ``tfps_wire``, and ``tfps_wire`` depends on neither nor on
anything heavier than pydantic."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "tfps_operator": ROOT / "operator" / "tfps_operator",
    "tfps_trainer": ROOT / "trainer_image" / "tfps_trainer",
    "tfps_wire": ROOT / "wire" / "tfps_wire",
}


def _imports(package: str) -> dict[str, set[str]]:
    """{module file: top-level names of every absolute import in it}."""
    out: dict[str, set[str]] = {}
    for path in PACKAGES[package].rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(ROOT))] = names
    return out


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
