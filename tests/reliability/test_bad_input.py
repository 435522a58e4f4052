"""Bad input, property-based: nothing the API accepts crashes the operator's pure parts, and a body
that slipped past validation (an older or looser CRD) ends in Failed/InvalidSpec, never in an
exception the reconcile loop would retry forever.

The controller's parse step is tested here, at the controller level, on purpose: the CRD is
cluster-wide and shared, so a permissive CRD cannot be installed on hack/cluster to store such an
object. ``Controller._job`` + ``invalid_spec`` are exactly what ``Controller._reconcile`` runs on the
body it read (operator/tfps_operator/controller.py).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from tfps_operator.api.models import replica_counts
from tfps_operator.api.validate import JobValidationError, validate_job
from tfps_operator.controller import Controller, parse_status
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.manifests.netpol import network_policy
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.manifests.pvc import storage_claim
from tfps_operator.manifests.service import headless_service
from tfps_operator.reconcile.machine import invalid_spec, reconcile
from tfps_operator.reconcile.observed import observe
from tfps_operator.reconcile.plan import Create, Delete, DeleteOwner
from tfps_operator.settings import BuildConfig, OperatorSettings
from tfps_wire.job_settings import JobSettings

from .strategies import mangled_bodies, observed_children, statuses, valid_jobs

CFG = BuildConfig(default_image="tfps-trainer:test")
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PHASES = {"Pending", "Running", "Restarting", "Exporting", "Succeeded", "Failed", "Suspended"}
COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
}  # no "explain": minutes on 2 busy cores


@given(valid_jobs())
@settings(max_examples=200, **COMMON)
def test_every_accepted_job_builds_every_child(body: dict[str, Any]) -> None:
    job = validate_job(body)  # the generator only makes jobs the API server accepts
    counts = replica_counts(job)
    for restart in (0, 3):
        pods = desired_pods(job, CFG, restart)
        assert len(pods) == sum(counts.values())
        for name, pod in pods.items():
            assert len(name) <= 63 and DNS_LABEL.match(name), name
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
            tf = json.loads(env["TF_CONFIG"])
            assert {r: len(a) for r, a in tf["cluster"].items()} == {
                r: n for r, n in counts.items() if n and r != "evaluator"
            } or tf["task"]["type"] == "evaluator"
            assert JobSettings.from_env({"TFPS_JOB": env["TFPS_JOB"]}).steps == job.spec.training.steps
            assert pod["metadata"]["labels"]["tfps.dev/restart"] == str(restart)
    for manifest in (headless_service(job, CFG), network_policy(job, CFG), storage_claim(job)):
        assert manifest is None or manifest["metadata"]["ownerReferences"][0]["uid"] == job.metadata.uid
    if job.spec.export.enabled:
        assert export_job(job, CFG)["spec"]["backoffLimit"] == job.spec.export.backoff_limit
    assert job_settings(job).paths.root.endswith(f"/{job.metadata.namespace}/{job.metadata.name}")


@given(data=st.data())
@settings(max_examples=250, **COMMON)
def test_reconcile_never_raises_and_never_duplicates_on_any_observation(data: st.DataObject) -> None:
    body = data.draw(valid_jobs(), label="job")
    job = validate_job(body, rules=False)
    raw_status = data.draw(statuses(), label="status")
    status = parse_status(raw_status)
    pods, ej, existing = data.draw(observed_children(body, restart_max=status.restarts + 1), label="children")
    now = T0 + timedelta(seconds=data.draw(st.integers(-(10**6), 10**7), label="now"))
    obs = observe(pods, ej, existing)

    plan = reconcile(job, status, obs, now, CFG)

    event(f"phase {status.phase} -> {plan.status.phase}")
    assert plan.status.phase in PHASES
    assert plan.status.restarts in (status.restarts, status.restarts + 1)
    assert plan.job_restarted == (plan.status.restarts == status.restarts + 1)
    keys = [a.key for a in plan.actions if isinstance(a, Create)]
    assert len(keys) == len(set(keys)), f"the same child created twice in one plan: {keys}"
    present = {p.name for p in obs.pods}
    assert not [k for k in keys if k.startswith("Pod/") and k[4:] in present], (
        "a pod created while one of that name exists"
    )
    if ej is not None:
        assert f"Job/{ej['metadata']['name']}" not in keys, "a second export Job"
    uids = {p.uid for p in obs.pods} | ({obs.export_job.uid} if obs.export_job else set())
    for a in plan.actions:
        if isinstance(a, Delete):
            assert a.uid in uids, f"delete of something not observed: {a}"
        if isinstance(a, DeleteOwner):
            assert plan.status.phase in ("Succeeded", "Failed")
    if status.phase in ("Succeeded", "Failed"):
        assert not keys and plan.status.phase == status.phase, "a finished job came back to life"
    if plan.status.phase == "Failed" and status.phase != "Failed":  # this pass failed it: it says why
        failed = next(c for c in plan.status.conditions if c.type == "Failed")
        assert failed.status == "True" and failed.reason and failed.message

    # Crash consistency: the operator died after writing this status and sees the same children
    # again. The same failure must not be counted twice.
    if plan.job_restarted and not any((p.restart or 0) >= plan.status.restarts for p in obs.pods):
        again = reconcile(job, plan.status, obs, now, CFG)
        assert again.status.restarts == plan.status.restarts and not again.job_restarted


def _controller() -> Controller:
    return Controller(kube=None, settings=OperatorSettings())  # type: ignore[arg-type] - _job does no I/O


@given(mangled_bodies(), statuses())
@settings(max_examples=250, **COMMON)
def test_a_body_that_slipped_past_validation_ends_in_invalid_spec_not_a_crash_loop(
    body: dict[str, Any], raw_status: dict[str, Any]
) -> None:
    parsed = _controller()._job(body)  # must not raise: an exception here is retried forever
    status = parse_status(raw_status)
    if not isinstance(parsed, str):
        event("mangled body still valid")
        reconcile(parsed, status, observe([], None, set()), T0, CFG)
        return
    event("InvalidSpec")
    assert parsed.strip(), "the reason is not empty"
    try:
        validate_job(body)
    except JobValidationError as exc:  # the operator leaves out unknown fields (a newer CRD's, after a rollback)
        known = [e for e in exc.errors if e.message != "unknown field"]
        assert known and parsed == "; ".join(map(str, known))
    plan = invalid_spec(status, body["metadata"].get("generation"), parsed, T0)
    assert not plan.actions, "an invalid job gets no children"
    if status.phase in ("Succeeded", "Failed"):
        assert plan.status.phase == status.phase and not plan.events
        return
    assert plan.status.phase == "Failed"
    failed = next(c for c in plan.status.conditions if c.type == "Failed")
    assert (failed.status, failed.reason, failed.message) == ("True", "InvalidSpec", parsed)
    assert [e.reason for e in plan.events] == ["InvalidSpec"]
    # The next pass (a resync, or a restarted operator) reads this status back: nothing more happens.
    again = invalid_spec(
        parse_status(
            plan.status.to_wire()
            if hasattr(plan.status, "to_wire")
            else plan.status.model_dump(by_alias=True, mode="json", exclude_none=True)
        ),
        body["metadata"].get("generation"),
        parsed,
        T0 + timedelta(seconds=60),
    )
    assert not again.events and not again.actions and again.status.phase == "Failed"


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "phase",
                "restarts",
                "conditions",
                "startTime",
                "export",
                "replicaStatuses",
                "checkpoint",
                "workers",
                "unknownField",
            ]
        ),
        st.none()
        | st.integers()
        | st.text(max_size=8)
        | st.lists(st.integers(), max_size=2)
        | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
        max_size=5,
    )
)
@settings(max_examples=200, **COMMON)
def test_any_stored_status_is_read_or_rebuilt(raw: dict[str, Any]) -> None:
    """A status written by another operator version (or by hand) never stops the reconcile loop."""
    status = parse_status(raw)
    assert status.restarts >= 0 or isinstance(raw.get("restarts"), int)
