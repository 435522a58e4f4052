"""The export's lineage in the state machine: which pod's image digest the export Job is handed (the lead
whose success ended training), recorded in status.export so that a later pass builds the same Job, and
kept when the export's result is recorded."""

from __future__ import annotations

import json
from typing import Any

from support.operator_helpers import CFG, T0, all_pods, batch_job, export_pod, later, make_job, observed, status
from tfps_operator.reconcile.machine import reconcile
from tfps_wire.lineage import Lineage, spec_sha256

RUNNING = {"phase": "Running", "startTime": T0.isoformat()}
CHIEF_ID = "registry.local/tfps-trainer@sha256:" + "c" * 64
WORKER_ID = "registry.local/other@sha256:" + "d" * 64
SUMMARY = "tfps-trainer chief/0: completed step 100/100; final checkpoint checkpoints/ckpt-100"


def _with_image(p: dict[str, Any], image_id: str, exit_code: int | None = None, message: str = "") -> dict[str, Any]:
    """``p`` with the trainer container's status as a kubelet reports it (image, imageID)."""
    state = {"terminated": {"exitCode": exit_code, "message": message}} if exit_code is not None else {"running": {}}
    p["status"]["containerStatuses"] = [
        {"name": "trainer", "image": image_id.split("@")[0] + ":1", "imageID": image_id, "state": state}
    ]
    return p


def _pods(job, chief_id: str = CHIEF_ID) -> list[dict[str, Any]]:
    pods = all_pods(job, chief_0="Succeeded")
    for p in pods:
        name = p["metadata"]["name"]
        if name.endswith("chief-0"):
            _with_image(p, chief_id, 0, SUMMARY)
        elif chief_id or name.endswith("worker-0"):
            _with_image(p, WORKER_ID)
    return pods


def _lineage_env(plan) -> Lineage:
    (job,) = [a.manifest for a in plan.creates() if a.manifest["kind"] == "Job"]
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    got = Lineage.from_env(env)
    assert got is not None
    return got


def test_the_export_job_gets_the_leads_image_digest_and_the_spec_it_hashes():
    job = make_job(ps=1, workers=1)
    st = status(**RUNNING, progress={"step": 90, "loss": 0.25, "stepsPerSecond": 12.5, "updated": later(50)})
    plan = reconcile(job, st, observed(job, _pods(job)), later(60), CFG)
    assert plan.status.phase == "Exporting"
    recorded = plan.status.export.lineage
    assert (recorded.image_id, recorded.pod) == (CHIEF_ID, "mnist-chief-0")  # the chief's, not a worker's
    assert recorded.spec_sha256 == spec_sha256(job.spec.to_wire())
    sent = _lineage_env(plan)
    assert sent.producer == "operator" and sent.image is not None
    assert (sent.image.image_id, sent.image.digest, sent.image.pod) == (CHIEF_ID, "sha256:" + "c" * 64, "mnist-chief-0")
    assert sent.spec == job.spec.to_wire() and sent.spec_sha256 == recorded.spec_sha256
    assert sent.training is not None
    assert (sent.training.step, sent.training.target_steps, sent.training.final_checkpoint) == (
        100,
        100,
        "checkpoints/ckpt-100",
    )
    assert (sent.training.loss, sent.training.steps_per_second, sent.training.reported_step) == (0.25, 12.5, 90)


def test_a_later_pass_without_the_leads_pod_builds_the_same_lineage_from_the_status():
    job = make_job(ps=1, workers=1, runPolicy={"cleanPodPolicy": "All"})
    first = reconcile(job, status(**RUNNING), observed(job, _pods(job)), later(60), CFG)
    # the Job's create was lost (operator restarted); the pods are gone by now
    again = reconcile(job, first.status, observed(job), later(70), CFG)
    assert _lineage_env(again) == _lineage_env(first)
    assert _lineage_env(again).image.image_id == CHIEF_ID  # type: ignore[union-attr]


def test_a_pod_status_without_an_image_id_records_no_digest():
    job = make_job(ps=1, workers=1)
    plan = reconcile(job, status(**RUNNING), observed(job, _pods(job, chief_id="")), later(60), CFG)
    assert plan.status.export.lineage.image_id is None
    assert _lineage_env(plan).image is None


def test_the_recorded_lineage_survives_the_export_result():
    job = make_job(ps=1, workers=1)
    exporting = reconcile(job, status(**RUNNING), observed(job, _pods(job)), later(60), CFG).status
    result = {"ok": True, "step": 100, "path": "exports/100", "manifest": "exports/100/manifest.json", "artifacts": []}
    obs = observed(
        job, [export_pod(job, "Succeeded", json.dumps(result), exit_code=0)], export_job=batch_job(job, "Complete")
    )
    done = reconcile(job, exporting, obs, later(90), CFG)
    assert done.status.phase == "Succeeded"
    assert done.status.export.step == 100 and done.status.export.lineage == exporting.export.lineage
    assert done.status.export.lineage.image_id == CHIEF_ID
