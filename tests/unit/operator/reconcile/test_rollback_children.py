"""A rollback of the operator must leave a running job's children alone, as an upgrade must.

The jobs of ``tests/support/upgrade/capture.py`` are built and advanced by the working tree's operator (Pending,
Running, Exporting, Suspended, Running again after a whole-job restart, queued in Kueue and admitted); then the
operator of commit ab5f88f, its own sources extracted from this repository's history, makes one pass over each
(``tests/support/upgrade/older_pass.py``). Rolling back to it means applying its CRD first (docs/install.md,
"Rolling back"), so the job and the status it reads are pruned by that CRD's schema, as the API server prunes
them. It must delete and rebuild nothing, and keep the phase and the restart count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.upgrade.capture import FLAVOR, SCENARIOS, capture
from support.upgrade.history import OLDER, REPO, extract
from support.upgrade.prune import prune

DRIVER = REPO / "tests" / "support" / "upgrade" / "older_pass.py"


@pytest.fixture(scope="module")
def older_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ab5f88f's operator sources and CRD, from this clone's history."""
    return extract(tmp_path_factory.mktemp(OLDER), "operator", "trainer_image", "crds")


def schema(tree: Path) -> dict[str, Any]:
    crd = yaml.safe_load((tree / "crds" / "pstrainingjobs.tfps.dev.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    return version["schema"]["openAPIV3Schema"]["properties"]


def built_by_the_working_tree() -> list[tuple[str, str, dict[str, Any]]]:
    """(scenario, phase, {job, cfg, status, objects}) for every phase the working tree's operator reaches."""
    out = []
    for name, scenario in sorted(SCENARIOS.items()):
        now = capture(name, scenario)
        for phase, state in now["phases"].items():
            out.append((name, phase, {"job": now["job"], "cfg": scenario["cfg"], **state}))
    return out


def test_the_operator_of_ab5f88f_keeps_every_child_the_working_tree_built(older_tree: Path) -> None:
    props = schema(older_tree)
    cases = built_by_the_working_tree()
    stored = [
        {
            "job": {**state["job"], "spec": prune(state["job"]["spec"], props["spec"])},
            "status": prune(state["status"], props["status"]),
            "objects": state["objects"],
            "cfg": state["cfg"],
            "flavors": [FLAVOR],
        }
        for _, _, state in cases
    ]
    env = {"PYTHONPATH": f"{older_tree / 'operator'}:{older_tree / 'trainer_image'}", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, str(DRIVER)], input=json.dumps(stored), capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    passes = json.loads(run.stdout)
    assert len(passes) == len(cases) > 10

    for (name, phase, state), older in zip(cases, passes, strict=True):
        where = f"{name} ({phase}) under the operator of {OLDER}"
        built = {f"{o['kind']}/{o['metadata']['name']}" for o in state["objects"]}
        rebuilt = [k for k in older["created"] if k in built or k.startswith(("Pod/", "Job/"))]
        assert not older["deleted"] and not rebuilt, f"{where}: deletes {older['deleted']}, creates {rebuilt}"
        written = state["status"]
        assert older["read_phase"] == written["phase"], f"{where}: the stored status was not readable"
        assert (older["phase"], older["restarts"]) == (written["phase"], written.get("restarts", 0)), where
