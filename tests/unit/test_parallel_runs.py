"""The unit and cluster tiers run on several pytest-xdist workers (tests/README.md, "Parallel runs"): names and
ports stay apart between workers, and a test that changes what every test shares is marked to run alone
(``serial``)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from support.parallel import free_ports, worker, worker_tag
from tfps_operator.tools.local.ports import listener_range

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _on_worker(monkeypatch: pytest.MonkeyPatch, index: int | None, count: int = 3) -> None:
    if index is None:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
        monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    else:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))


def test_the_worker_and_its_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    _on_worker(monkeypatch, None)
    assert (worker(), worker_tag()) == ((0, 1), "")
    _on_worker(monkeypatch, 2, 3)
    assert (worker(), worker_tag()) == ((2, 3), "w2")
    _on_worker(monkeypatch, 0, 1)  # -n 1: one worker, nothing to keep apart
    assert worker_tag() == ""


def test_namespace_names_carry_the_worker_and_stay_dns_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("tests_root_conftest", TESTS / "conftest.py")
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, conftest)  # its dataclass looks its module up there
    spec.loader.exec_module(conftest)
    nodeid = "tests/x.py::test_" + "a_very_long_test_name_" * 5 + "[param-1]"
    _on_worker(monkeypatch, None)
    plain = conftest._namespace_name(nodeid)
    _on_worker(monkeypatch, 11, 12)
    tagged = conftest._namespace_name(nodeid)
    assert re.fullmatch(r"t-[a-z0-9-]+-[0-9a-f]{6}", plain), plain
    assert re.fullmatch(r"t-[a-z0-9-]+-w11[0-9a-f]{6}", tagged), tagged
    # a DNS label, with room for what tests append to it (the pool's node names `<ns>-<i>`, PVs `<ns>-data`)
    assert len(tagged) + len("-data") <= 63


def test_ports_of_different_workers_never_coincide(monkeypatch: pytest.MonkeyPatch) -> None:
    span = listener_range()
    if span is None:
        pytest.skip("no ephemeral range to read here: the kernel picks the ports")
    seen: dict[int, int] = {}
    for index in range(3):
        _on_worker(monkeypatch, index, 3)
        ports = free_ports(8)
        assert len(set(ports)) == 8
        for port in ports:
            assert span[0] <= port <= span[1] and port % 3 == index, (index, port)
            seen[port] = index
    assert len(seen) == 24
    _on_worker(monkeypatch, None)
    assert all(span[0] <= p <= span[1] for p in free_ports(4))


# What a test may do only alone: (what it calls, the mark it needs, why).
SHARED = [
    (re.compile(r"install_crd\([^)]*manifest="), "serial", "applies another CRD over the shared one"),
    (re.compile(r"kserve\.(installed|remove)\("), "serial", "installs or removes KServe's CRDs"),
    (re.compile(r"HACK_KSERVE\b.*\"(up|down)\""), "serial", "runs hack/kserve up/down"),
    (re.compile(r"\bBUSY_LOOP\b"), "serial", "runs busy loops in cgroups (the machine's CPUs overcommitted)"),
    (re.compile(r"\"cluster\"\),\s*\"fault\""), "serial", "injects a fault into the shared control plane"),
]


def _marks(decorators: list[ast.expr]) -> str:
    return " ".join(ast.unparse(d) for d in decorators)


def _module_marks(tree: ast.Module) -> str:
    return " ".join(
        ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
    )


def test_tests_that_change_what_every_test_shares_are_marked() -> None:
    """A test function that does one of SHARED carries the mark (or its module does); a fixture or helper that
    does it makes every test of its module need the mark. Modules run only alone anyway (the soak, the chaos
    suite, the real node: `slow`/`realnode`, outside the parallel pass) are left out."""
    unmarked = []
    for path in sorted(TESTS.rglob("test_*.py")):
        rel = path.relative_to(TESTS)
        if rel.parts[0] in ("soak", "chaos", "realnode", "unit"):
            continue
        source = path.read_text()
        tree = ast.parse(source)
        module_marks = _module_marks(tree)
        tests = {
            node: ast.get_source_segment(source, node) or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        }
        outside = source
        for text in tests.values():
            outside = outside.replace(text, "")
        for pattern, mark, why in SHARED:
            if pattern.search(outside) and f"mark.{mark}" not in module_marks:
                unmarked.append(f"{rel}: {why} outside a test, and its pytestmark has no {mark}")
            for node, text in tests.items():
                if pattern.search(text) and f"mark.{mark}" not in _marks(node.decorator_list) + module_marks:
                    unmarked.append(f"{rel}::{node.name}: {why}, not marked {mark}")
    assert not unmarked, "\n".join(unmarked)
