"""Upgrading the operator under running jobs, against the real API server: the working tree's operator takes
over jobs in the state the operator of commit ab5f88f left them (Pending, Running, Exporting, Succeeded, Suspended,
Running after a whole-job restart, queued in Kueue), keeps every child (same uids) and every status field, and the jobs
finish (or, queued, start once Kueue admits them) as they would have.

What ab5f88f left is replayed from ``tests/support/upgrade/ab5f88f.json`` (its own state machine and builders,
captured from a worktree of that commit by ``tests/support/upgrade/capture.py``): the children it created,
exactly as built, and the status it wrote. ab5f88f's operator process itself cannot run here: it refuses every
job stored under today's CRD (``spec.strategy: unknown field``: docs/install.md, "Upgrading"), and the shared
CRD cannot be swapped for its older one under the other tests' jobs.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from operator_harness import GROUP, PLURAL, VERSION

from support import kueue
from tfps_wire.export_result import ExportSucceeded, encode

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "upgrade" / "ab5f88f.json"
SCENARIO = "ps-eval-claim-export"
NODE = "kwok-node-1"


def replay(kube: Any, phase: str, name: str, scenario: str = SCENARIO) -> dict[str, str]:
    """Create the job ``name`` as ab5f88f left ``scenario`` in ``phase``: its status, then its children.
    Returns the uids of the children by ``Kind/name``."""
    older = json.loads(FIXTURE.read_text())["scenarios"][scenario]
    text = json.dumps({"job": older["job"], **older["phases"][phase]})
    state = json.loads(
        text.replace(scenario, name).replace('"team-a"', json.dumps(kube.ns)).replace(".team-a.", f".{kube.ns}.")
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = state["status"]
    status["startTime"] = now
    for c in status.get("conditions", []):
        c["lastTransitionTime"] = now
    body = copy.deepcopy(state["job"])
    body["metadata"] = {"name": name, "namespace": kube.ns}
    job = kube.create_job(body)
    kube.custom.patch_namespaced_custom_object_status(GROUP, VERSION, kube.ns, PLURAL, name, {"status": status})
    uids: dict[str, str] = {}
    for obj in state["objects"]:
        meta = {k: v for k, v in obj["metadata"].items() if k not in ("uid", "creationTimestamp")}
        meta["ownerReferences"] = [  # the job, or (an export pod) the export Job made just before
            {**o, "uid": job["metadata"]["uid"] if o["kind"] == "PSTrainingJob" else uids[f"{o['kind']}/{o['name']}"]}
            for o in meta["ownerReferences"]
        ]
        manifest = {**obj, "metadata": meta}
        manifest.pop("status", None)
        kind = obj["kind"]
        if kind == "Pod":
            manifest["spec"] = {**manifest["spec"], "nodeName": NODE}
            made = kube.core.create_namespaced_pod(kube.ns, manifest)
        elif kind == "Service":
            made = kube.core.create_namespaced_service(kube.ns, manifest)
        elif kind == "NetworkPolicy":
            made = kube.net.create_namespaced_network_policy(kube.ns, manifest)
        elif kind == "PersistentVolumeClaim":
            made = kube.core.create_namespaced_persistent_volume_claim(kube.ns, manifest)
        elif kind == "Workload":
            made = kube.custom.create_namespaced_custom_object(*kueue.API, kube.ns, "workloads", manifest)
        else:
            made = kube.batch.create_namespaced_job(kube.ns, manifest)
        uids[f"{kind}/{meta['name']}"] = made["metadata"]["uid"] if kind == "Workload" else made.metadata.uid
        if kind == "Pod" and obj["status"]["phase"] == "Succeeded":
            (container,) = obj["status"]["containerStatuses"]
            kube.finish_pod(meta["name"], "Succeeded", 0, container["state"]["terminated"].get("message", ""))
    trainer_or_not_pod = {  # the children Cluster.children() lists: no export pod
        f"{o['kind']}/{o['metadata']['name']}"
        for o in state["objects"]
        if o["kind"] != "Pod" or "tfps.dev/replica-type" in o["metadata"]["labels"]
    }
    return {k: v for k, v in uids.items() if k in trainer_or_not_pod}


def export_done(kube: Any, name: str) -> None:
    """Play the export pod: it exported step 10."""
    pod = kube.wait_until(
        lambda: next(iter(kube.pods(f"job-name={name}-export")), None), timeout=30, what=f"{name}'s export pod"
    )
    result = ExportSucceeded(step=10, path="exports/10", manifest="exports/10/manifest.json", artifacts=[])
    kube.finish_pod(pod, "Succeeded", 0, encode(result))


def kept(kube: Any, left: dict[str, dict[str, str]], written: dict[str, dict[str, Any]]) -> None:
    """Every child ab5f88f left is there with its uid (none deleted, none recreated), every status field too."""
    for name, uids in left.items():
        assert kube.children(name) == uids, f"{name}: a child was deleted or recreated"
        now = kube.status(name)
        lost = sorted(k for k in written[name] if k not in now)
        assert not lost, f"{name}: status fields lost: {lost}"
        assert (now["restarts"], now["startTime"]) == (written[name]["restarts"], written[name]["startTime"])
        assert {c["type"] for c in written[name]["conditions"]} <= {c["type"] for c in now["conditions"]}


def open_queue(kube: Any) -> None:
    """The LocalQueue ``lq`` the queued job names, on a ClusterQueue of this namespace's own: Kueue admits it."""
    name = kube.ns
    kube.custom.create_cluster_custom_object(*kueue.API, "resourceflavors", kueue.resource_flavor(name))
    kube.custom.create_cluster_custom_object(*kueue.API, "clusterqueues", kueue.cluster_queue(name, kube.ns, name, "8"))
    kube.custom.create_namespaced_custom_object(*kueue.API, kube.ns, "localqueues", kueue.local_queue("lq", name))


@pytest.fixture
def cluster_queue_cleanup(kube: Any) -> Any:
    yield
    for kind in ("clusterqueues", "resourceflavors"):
        try:
            kube.custom.delete_cluster_custom_object(*kueue.API, kind, kube.ns)
        except Exception:  # never created: the test failed before
            pass


def test_the_working_trees_operator_keeps_what_ab5f88f_left_and_the_jobs_finish(
    kube: Any, start_operator: Any, cluster_queue_cleanup: Any
) -> None:
    left = {"pend": replay(kube, "Pending", "pend"), "run": replay(kube, "Running", "run")}
    left["exp"] = replay(kube, "Exporting", "exp")
    left["held"] = replay(kube, "Suspended", "held", "on-hold")
    left["again"] = replay(kube, "Restarted", "again", "second-run")
    left["queued"] = replay(kube, "Queued", "queued", "queued")
    left["done"] = replay(kube, "Succeeded", "done")
    written = {n: kube.status(n) for n in left}
    kube.wait_pods_running("run", [k.split("/")[1] for k in left["run"] if k.startswith("Pod/")])

    start_operator(kube.ns, extra_env={"TFPS_KUEUE": "true"})
    for name in left:  # the working tree's operator has made its pass: it writes the selector ab5f88f did not
        kube.wait_until(lambda n=name: "workerSelector" in kube.status(n), timeout=30, what=f"{name} reconciled")
    kept(kube, left, written)
    kube.wait_phase("pend", "Running")
    kept(kube, left, written)
    assert kube.status("run")["phase"] == "Running" and kube.status("exp")["phase"] == "Exporting"
    assert kube.status("held")["phase"] == "Suspended" and not kube.trainer_pods("held")
    assert (kube.status("again")["phase"], kube.status("again")["restarts"]) == ("Running", 1)
    queued = kube.status("queued")
    assert (queued["phase"], queued["reason"]) == ("Suspended", "WaitingForAdmission")
    assert not kube.trainer_pods("queued")
    assert kube.status("done")["phase"] == "Succeeded" and kube.status("done")["export"]["step"] == 100

    open_queue(kube)  # Kueue admits the Workload ab5f88f created: the job starts whole
    kube.wait_pods_running("queued", ["queued-chief-0", "queued-ps-0", "queued-worker-0", "queued-worker-1"])
    kube.wait_phase("queued", "Running")
    assert kube.children("queued")["Workload/psjob-queued"] == left["queued"]["Workload/psjob-queued"]

    kube.finish_pod("run-chief-0", "Succeeded", 0)
    kube.wait_phase("run", "Exporting")
    for name in ("run", "exp"):
        export_done(kube, name)
        st = kube.wait_phase(name, "Succeeded")
        assert st["export"]["step"] == 10 and st["export"]["jobName"] == f"{name}-export"
        assert len([j for j in kube.batch.list_namespaced_job(kube.ns).items if j.metadata.name.startswith(name)]) == 1
    assert kube.children("exp")["Job/exp-export"] == left["exp"]["Job/exp-export"]
