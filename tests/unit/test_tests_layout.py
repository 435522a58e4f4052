"""tests/unit mirrors the source layout: each folder under it names a folder of the source (``operator/``
is ``operator/tfps_operator/``, ``trainer_image/`` is ``trainer_image/tfps_trainer/``, ``wire/`` is
``wire/tfps_wire/``, ``hack/`` is ``hack/``), so a rule's tests sit where its module does. The tier a test
needs (a cluster, TensorFlow, a real node) is a marker, never a folder here."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
SOURCES = {
    "operator": ROOT / "operator" / "tfps_operator",
    "trainer_image": ROOT / "trainer_image" / "tfps_trainer",
    "wire": ROOT / "wire" / "tfps_wire",
    "hack": ROOT / "hack",
}
TIERS = {"cluster", "tf", "realnode", "slow", "soak", "unit", "integration", "e2e"}


def test_every_folder_of_tests_unit_is_a_folder_of_the_source():
    folders = [p for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert folders, "tests/unit has its tests in folders by package"
    wrong = []
    for folder in folders:
        top, *rest = folder.relative_to(UNIT).parts
        source = SOURCES.get(top)
        if source is None or not source.joinpath(*rest).is_dir() or TIERS & set(folder.relative_to(UNIT).parts):
            wrong.append(str(folder.relative_to(ROOT)))
    assert not wrong, f"not a folder of the source: {wrong}"


def test_only_the_layout_wide_checks_sit_at_the_top():
    assert sorted(p.name for p in UNIT.glob("*.py")) == [
        "test_package_walls.py",
        "test_parallel_runs.py",
        "test_tests_layout.py",
    ]
