"""The real-node tier: kubelet + containerd (hack/cluster up --real-node) run the pods the operator builds.

kwok proves the control logic; these tests prove that the generated pods really run: the trainer image
(built without Docker, imported into containerd), TF_CONFIG names resolved by CoreDNS through the
EndpointSlices of the job's headless Service, the security context, the job's volume (a hostPath PV on
the node), exit codes, and the export Job's artifacts. The operator runs out-of-cluster with the token of
the chart's ServiceAccount (the API server listens on loopback only, which a pod cannot reach).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import Cluster as Kube
from operator_harness import OperatorProcess

from conftest import ON_REAL_NODE  # tests/realnode/conftest.py (pytest puts its directory first on sys.path)
from tfps_operator.manifests import names

pytestmark = [pytest.mark.realnode, pytest.mark.cluster, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
POD_SUBNET = ipaddress.ip_network(os.environ.get("TFPS_REALNODE_POD_SUBNET", "10.213.0.0/24"))
TRAINER_IMAGE = os.environ.get("TFPS_TRAINER_IMAGE", "tfps-trainer:0.1.0")
BUSYBOX = "tfps.local/busybox:1"
NODE_IP = os.environ.get("TFPS_REALNODE_NODE_IP", "10.213.0.1")
KUBELET_PORT = int(os.environ.get("TFPS_KUBELET_PORT", "16250"))


def on_real_node(spec: dict[str, Any]) -> dict[str, Any]:
    return {**spec, **copy.deepcopy(ON_REAL_NODE)}


def pod_terminated(core: Any, ns: str, name: str) -> dict[str, Any] | None:
    p = core.read_namespaced_pod(name, ns)
    for cs in p.status.container_statuses or []:
        if cs.state and cs.state.terminated:
            return {"exitCode": cs.state.terminated.exit_code, "message": cs.state.terminated.message or ""}
    return None


def no_image_pulls(core: Any, ns: str) -> None:
    """Every image is pre-imported: a Pulling event would mean the node tried a registry."""
    pulls = [
        e.message for e in core.list_namespaced_event(ns).items if e.reason in ("Pulling", "Failed", "ErrImagePull")
    ]
    assert not pulls, pulls


def test_busybox_pods_get_a_private_pod_network_and_coredns_resolves_headless_names(
    realnode, k8s, namespace, wait_until
):
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "smoke"},
            "spec": {"clusterIP": "None", "selector": {"app": "smoke"}, "ports": [{"name": "x", "port": 2222}]},
        },
    )
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "a", "labels": {"app": "smoke"}},
            "spec": on_real_node(
                {
                    "hostname": "a",
                    "subdomain": "smoke",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "imagePullPolicy": "Never",
                            "command": ["sleep", "600"],
                            "securityContext": {
                                "runAsUser": 1000,
                                "runAsNonRoot": True,
                                "allowPrivilegeEscalation": False,
                            },
                        }
                    ],
                }
            ),
        },
    )
    a = wait_until(
        lambda: (p := core.read_namespaced_pod("a", namespace)).status.phase == "Running" and p,
        timeout=120,
        interval=0.5,
        what="busybox pod a Running on the real node",
    )
    assert a.spec.node_name == realnode
    assert ipaddress.ip_address(a.status.pod_ip) in POD_SUBNET, a.status.pod_ip
    fqdn = f"a.smoke.{namespace}.svc.cluster.local"
    # the kubelet's API port on the node address: pods must not reach it (nor anything but DNS on the host)
    script = (
        f"nslookup {fqdn} > /dev/termination-log 2>&1; rc=$?; echo ROUTES >> /dev/termination-log; "
        "ip route >> /dev/termination-log; echo UID $(id -u) >> /dev/termination-log; "
        f"busybox nc -w 3 {NODE_IP} {KUBELET_PORT} </dev/null; echo KUBELET_NC_RC $? >> /dev/termination-log; "
        "exit $rc"
    )
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "probe"},
            "spec": on_real_node(
                {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", script],
                            "securityContext": {"runAsUser": 1000},
                        }
                    ],
                }
            ),
        },
    )
    done = wait_until(
        lambda: pod_terminated(core, namespace, "probe"), timeout=120, interval=0.5, what="probe pod done"
    )
    msg = done["message"]
    assert done["exitCode"] == 0, msg
    assert a.status.pod_ip in msg.split("ROUTES")[0], msg  # CoreDNS answered with pod a's IP
    routes = msg.split("ROUTES")[1]
    assert "default" not in routes, routes  # nothing is routed off the node
    assert str(POD_SUBNET) in routes and "UID 1000" in msg, msg
    nc_rc = re.search(r"KUBELET_NC_RC (\d+)", msg)
    assert nc_rc and nc_rc.group(1) != "0", msg  # the host rejects pods on kubelet's port
    no_image_pulls(core, namespace)


def test_kubectl_logs_and_exec_reach_the_node_kubelet_and_only_root_can(realnode, cluster, k8s, namespace, wait_until):
    """The API server dials the node's InternalIP (the bridge address) for logs/exec; kubelet serves there
    with anonymous access, which iptables limits to root processes of this machine (and no pod)."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "talker"},
            "spec": on_real_node(
                {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "echo hello from $(hostname); exec sleep 600"],
                            "securityContext": {
                                "runAsUser": 1000,
                                "runAsNonRoot": True,
                                "allowPrivilegeEscalation": False,
                            },
                        }
                    ],
                }
            ),
        },
    )
    wait_until(
        lambda: core.read_namespaced_pod("talker", namespace).status.phase == "Running",
        timeout=120,
        interval=0.5,
        what="busybox pod talker Running on the real node",
    )
    node = core.read_node(realnode)
    assert node.status.daemon_endpoints.kubelet_endpoint.port == KUBELET_PORT
    assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [NODE_IP]
    logs = wait_until(
        lambda: "hello from talker" in (out := cluster.kubectl("-n", namespace, "logs", "talker").stdout) and out,
        timeout=30,
        interval=0.5,
        what="kubectl logs talker",
    )
    assert logs.strip() == "hello from talker", logs
    ex = cluster.kubectl("-n", namespace, "exec", "talker", "--", "sh", "-c", "id -u; cat /etc/hostname")
    assert ex.stdout.split() == ["1000", "talker"], ex
    url = f"https://{NODE_IP}:{KUBELET_PORT}/healthz"
    curl = ["curl", "-ksS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", url]
    assert subprocess.run(curl, capture_output=True, text=True, timeout=30).stdout == "200"
    nobody = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *curl],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert nobody.returncode != 0 and nobody.stdout != "200", nobody  # another uid gets a reset


def quickstart(steps: int | None = None, every: int | None = None) -> dict[str, Any]:
    """examples/quickstart.yaml, every replica (and so the export Job: it takes the chief's) on the real node."""
    job = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    for role in ("chief", "ps", "worker"):
        r = job["spec"]["replicas"][role]
        r.setdefault("template", {}).setdefault("spec", {}).update(copy.deepcopy(ON_REAL_NODE))
    if steps:
        job["spec"]["training"]["steps"] = steps
    if every:
        job["spec"]["training"]["checkpoint"]["everySteps"] = every
    return job


@pytest.fixture
def kserve_crds(k8s):
    """KServe's CRDs served while the test runs (installed before its operator starts)."""
    from support import kserve

    with kserve.installed(k8s):
        yield


@pytest.fixture
def operated(realnode, cluster, k8s, namespace, wait_until, hostpath_pv, tmp_path):
    """The chart installed (operator Deployment scaled to 0), its ServiceAccount's token driving
    `tfps operator` on the host, and a hostPath PV waiting for the job's claim."""
    from chart.rbac import helm_install

    helm = str(cluster.bin / "helm")
    with helm_install(
        helm,
        cluster,
        namespace,
        sets=["replicaCount=0", f"watchNamespaces={{{namespace}}}", f"trainerImage={TRAINER_IMAGE}"],
    ) as inst:
        op = OperatorProcess(
            str(inst.kubeconfig),
            [namespace],
            tmp_path / "operator.log",
            extra_env={"TFPS_DEFAULT_IMAGE": TRAINER_IMAGE},
        ).start()
        kube = Kube(k8s, namespace, wait_until)
        try:
            yield kube, op, hostpath_pv
        finally:
            # delete the jobs while the operator runs, so their children go with them
            for j in kube.custom.list_namespaced_custom_object("tfps.dev", "v1alpha1", namespace, "pstrainingjobs")[
                "items"
            ]:
                kube.delete_job(j["metadata"]["name"])
            try:
                wait_until(
                    lambda: (
                        not kube.custom.list_namespaced_custom_object(
                            "tfps.dev", "v1alpha1", namespace, "pstrainingjobs"
                        )["items"]
                    ),
                    timeout=90,
                    interval=1,
                    what="jobs deleted",
                )
            finally:
                op.stop()


def readers_gone(kube: Kube, wait_until: Any) -> None:
    """Every pod that read a job's exports for a download was deleted, and no image was pulled."""
    from tfps_operator.manifests.artifact_reader import READER_LABEL

    wait_until(
        lambda: not kube.core.list_namespaced_pod(kube.ns, label_selector=READER_LABEL).items,
        timeout=60,
        interval=1,
        what="reader pods gone",
    )
    no_image_pulls(kube.core, kube.ns)


def quickstart_succeeded(kube: Kube, op: Any, wait_until: Any, what: str) -> dict[str, Any]:
    """The quickstart job's status once it has finished; it must have Succeeded (else the operator's log)."""
    st = wait_until(
        lambda: (s := kube.status("quickstart")).get("phase") in ("Succeeded", "Failed") and s,
        timeout=900,
        interval=2,
        what=what,
    )
    assert st["phase"] == "Succeeded", (st, op.log()[-3000:])
    return st


def trainer_pods_running(kube: Kube, job: str, n: int) -> dict[str, dict[str, Any]] | None:
    pods = kube.trainer_pods(job)
    running = {
        k: p
        for k, p in pods.items()
        if p["status"].get("phase") == "Running"
        and all(c.get("ready") for c in p["status"].get("containerStatuses") or [{}])
    }
    return running if len(running) == n else None


def test_quickstart_trains_checkpoints_and_exports_on_real_pods(operated, realnode, wait_until):
    kube, op, pv = operated
    data = pv(names.pvc_name("quickstart"))
    t0 = time.monotonic()
    kube.create_job(quickstart())
    pods = wait_until(
        lambda: trainer_pods_running(kube, "quickstart", 4),
        timeout=300,
        interval=1,
        what="chief, ps and 2 workers Running on the real node",
    )
    t_running = time.monotonic() - t0
    for name, p in pods.items():
        assert p["spec"]["nodeName"] == realnode, name
        assert ipaddress.ip_address(p["status"]["podIP"]) in POD_SUBNET, name
        cs = p["status"]["containerStatuses"][0]
        assert cs["image"].endswith(TRAINER_IMAGE) and cs["imageID"], cs
    st = quickstart_succeeded(kube, op, wait_until, "quickstart Succeeded")
    t_done = time.monotonic() - t0
    steps = kube.job("quickstart")["spec"]["training"]["steps"]
    written = {int(p.name.split("-")[1].split(".")[0]) for p in data.rglob("ckpt-*.index")}
    assert steps in written, sorted(str(p) for p in data.rglob("*"))[:50]  # checkpoints really on the PV
    status_step = (st.get("checkpoint") or {}).get("step")
    assert status_step is None or status_step in written, st  # if set, it names one of them
    export = st["export"]
    assert export["step"] == steps, export  # the final checkpoint was exported
    assert {a["format"] for a in export["artifacts"]} == {"savedmodel", "tflite", "onnx"}, export
    for a in export["artifacts"]:
        rel = Path(a["path"])
        on_pv = list(data.rglob(rel.name))
        assert on_pv, (a, sorted(str(p) for p in data.rglob("*"))[:80])  # the export Job wrote it to the PV
        assert a["maxError"] is not None, a
    no_image_pulls(kube.core, kube.ns)
    print(f"\nquickstart on the real node: pods Running after {t_running:.0f}s, Succeeded after {t_done:.0f}s")
    if status_step != steps:
        chief = kube.trainer_pods("quickstart").get(names.pod_name("quickstart", "chief", 0), {})
        message = [
            cs["state"]["terminated"].get("message")
            for cs in chief.get("status", {}).get("containerStatuses") or []
            if (cs.get("state") or {}).get("terminated")
        ]
        # A job that trains within one progress poll (this one: 300 steps in seconds) gets its final
        # checkpoint from the chief's success summary in its termination message.
        pytest.fail(
            f"status.checkpoint.step {status_step} != final checkpoint {steps}; chief's termination message {message!r}"
        )


def chief_log_steps(ns: str, marker: str) -> list[int]:
    """Steps in the chief's log lines containing ``marker`` + step (kubelet's files under /var/log/pods),
    every run of the chief pod included."""
    pattern = f"{ns}_{names.pod_name('quickstart', 'chief', 0)}_*/*/*.log"
    return [
        int(m.group(1))
        for f in Path("/var/log/pods").glob(pattern)
        for line in f.read_text(errors="replace").splitlines()
        if (m := re.search(re.escape(marker) + r"(\d+)", line))
    ]


LONG_STEPS, LONG_EVERY = 6000, 500  # ~2-3 min of training here: time to hit pods mid-run


@pytest.mark.slow
def test_deleting_a_worker_pod_mid_training_still_completes(operated, wait_until):
    kube, op, pv = operated
    pv(names.pvc_name("quickstart"))
    kube.create_job(quickstart(steps=LONG_STEPS, every=LONG_EVERY))
    wait_until(lambda: trainer_pods_running(kube, "quickstart", 4), timeout=300, interval=1, what="pods Running")
    wait_until(lambda: chief_log_steps(kube.ns, "checkpoint step "), timeout=300, interval=1, what="a first checkpoint")
    victim = names.pod_name("quickstart", "worker", 1)
    uid = kube.trainer_pods("quickstart")[victim]["metadata"]["uid"]
    kube.core.delete_namespaced_pod(victim, kube.ns)
    # the operator replaces the lost worker (a new pod of the same name), the job is not restarted
    wait_until(
        lambda: (p := kube.trainer_pods("quickstart").get(victim)) and p["metadata"]["uid"] != uid,
        timeout=300,
        interval=1,
        what=f"{victim} recreated",
    )
    st = wait_until(
        lambda: (s := kube.status("quickstart")).get("phase") in ("Succeeded", "Failed") and s,
        timeout=1200,
        interval=2,
        what="job finished after the worker was deleted",
    )
    assert st["phase"] == "Succeeded", (st, op.log()[-3000:])
    assert st.get("restarts", 0) == 0, st
    assert LONG_STEPS in chief_log_steps(kube.ns, "completed step "), chief_log_steps(kube.ns, "checkpoint step ")


@pytest.mark.slow
def test_deleting_the_ps_pod_restarts_the_job_and_resumes_from_the_checkpoint(operated, wait_until):
    kube, op, pv = operated
    pv(names.pvc_name("quickstart"))
    kube.create_job(quickstart(steps=LONG_STEPS, every=LONG_EVERY))
    wait_until(lambda: trainer_pods_running(kube, "quickstart", 4), timeout=300, interval=1, what="pods Running")
    ck = max(
        wait_until(
            lambda: chief_log_steps(kube.ns, "checkpoint step "), timeout=300, interval=1, what="a first checkpoint"
        )
    )
    kube.core.delete_namespaced_pod(names.pod_name("quickstart", "ps", 0), kube.ns)
    wait_until(lambda: kube.status("quickstart").get("restarts", 0) >= 1, timeout=300, interval=1, what="a job restart")
    st = wait_until(
        lambda: (s := kube.status("quickstart")).get("phase") in ("Succeeded", "Failed") and s,
        timeout=1200,
        interval=2,
        what="job finished after the PS was deleted",
    )
    assert st["phase"] == "Succeeded", (st, op.log()[-3000:])
    assert st["restarts"] == 1, st
    # resumed: the restarted chief's log names a checkpoint at or after the one written before the PS went
    resumed = chief_log_steps(kube.ns, "resumed from checkpoint step ")
    assert resumed and max(resumed) >= ck, (resumed, ck)
    assert LONG_STEPS in chief_log_steps(kube.ns, "completed step "), chief_log_steps(kube.ns, "checkpoint step ")


def test_kubectl_scale_grows_a_running_job_that_resumes_from_the_chiefs_save(operated, wait_until):
    """One resize of a running job in real containers: 2 → 3 workers. The new worker starts beside the run,
    the chief is stopped (it saves the steps it scheduled), every pod restarts with the new TF_CONFIG, and
    the new run resumes from exactly that checkpoint."""
    kube, op, pv = operated
    pv(names.pvc_name("quickstart"))
    kube.create_job(quickstart(steps=3000, every=500))
    wait_until(lambda: trainer_pods_running(kube, "quickstart", 4), timeout=300, interval=1, what="pods Running")
    wait_until(lambda: chief_log_steps(kube.ns, "checkpoint step "), timeout=300, interval=1, what="a first checkpoint")
    kube.custom.patch_namespaced_custom_object_scale(
        "tfps.dev", "v1alpha1", kube.ns, "pstrainingjobs", "quickstart", {"spec": {"replicas": 3}}
    )
    st = wait_until(
        lambda: (s := kube.status("quickstart")).get("resize", {}).get("completed") and s,
        timeout=300,
        interval=1,
        what="the resize to 3 workers done",
    )
    rz = st["resize"]
    assert (rz["method"], rz["to"]["worker"], st["clusterSize"]["worker"]) == ("Restart", 3, 3), st
    assert rz["stepsLost"] == 0 and rz["resumedFrom"] >= rz["step"], rz
    st = quickstart_succeeded(kube, op, wait_until, "quickstart Succeeded after the resize")
    assert (st["restarts"], st["resizes"]) == (1, 1), st
    assert rz["resumedFrom"] in chief_log_steps(kube.ns, "resumed from checkpoint step "), rz
    assert 3000 in chief_log_steps(kube.ns, "completed step ")
    print(f"\nresize 2 -> 3 on the real node: {rz}")


def test_client_logs_and_download_artifacts_against_a_real_kubelet(
    kserve_crds, operated, realnode, kubeconfig, wait_until, tmp_path, capsys
):
    """TFPSClient.logs (followed while the chief trains, then read back) and `tfps logs`; download_artifacts
    and `tfps artifacts --download` through a reader pod on the node (exec + tar), checked file by file
    against the PV and against manifest.json, which catches a file changed on the volume."""
    import threading

    from tfps_operator.tools.cli import main as tfps
    from tfps_operator.tools.client import ChecksumMismatch, TFPSClient

    kube, op, pv = operated
    # served (KServe's CRDs are installed: the verified export is handed off), so on a claim of the user's:
    # a served model outlives its job, and the API server refuses to serve from the job's own claim
    claim = "models"
    data = pv(claim)
    kube.core.create_namespaced_persistent_volume_claim(
        kube.ns,
        {
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": f"{kube.ns}-{claim}",
                "resources": {"requests": {"storage": "2Gi"}},
            },
        },
    )
    client = TFPSClient(kubeconfig=kubeconfig, namespace=kube.ns)
    job = quickstart()
    job["spec"]["storage"] = {"claimName": claim}
    job["spec"]["serving"] = {"name": "quickstart"}
    kube.create_job(job)
    chief = names.pod_name("quickstart", "chief", 0)
    wait_until(
        lambda: kube.trainer_pods("quickstart").get(chief, {}).get("status", {}).get("phase") == "Running",
        timeout=300,
        interval=0.5,
        what="the chief Running",
    )
    followed: list[str] = []
    errors: list[BaseException] = []

    def follow() -> None:
        try:
            followed.extend(client.logs("quickstart", "chief", follow=True))
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    reader.join(timeout=600)  # the stream ends when the chief's container does
    assert not reader.is_alive() and not errors, (errors, followed[-5:])
    text = "".join(followed)
    assert "tfps-trainer chief: no checkpoint found, starting at step 0" in text, text[-3000:]
    assert "tfps-trainer chief: checkpoint step 300 -> " in text, text[-3000:]
    # read back once the container ended: the same text as followed
    assert client.logs("quickstart", "chief") == text
    assert client.logs("quickstart", "chief", tail_lines=1) == text.splitlines(keepends=True)[-1]
    code = tfps(["logs", "quickstart", "-f", "--kubeconfig", kubeconfig, "-n", kube.ns])
    assert (code, capsys.readouterr().out) == (0, text)

    st = wait_until(
        lambda: (s := kube.status("quickstart")).get("phase") in ("Succeeded", "Failed") and s,
        timeout=900,
        interval=2,
        what="quickstart Succeeded",
    )
    assert st["phase"] == "Succeeded", (st, op.log()[-3000:])
    step = st["export"]["step"]
    got = client.download_artifacts("quickstart", dest=tmp_path / "dl")
    assert got == tmp_path / "dl" / str(step)
    (published,) = [p for p in data.rglob(f"exports/{step}") if p.is_dir()]
    on_pv = {p.relative_to(published): p for p in published.rglob("*") if p.is_file()}
    local = {p.relative_to(got): p for p in got.rglob("*") if p.is_file()}
    assert set(local) == set(on_pv) and Path("manifest.json") in local, (sorted(local), sorted(on_pv))
    for rel, p in on_pv.items():
        assert local[rel].read_bytes() == p.read_bytes(), rel
    code = tfps(
        ["artifacts", "quickstart", "--download", str(tmp_path / "cli"), "--kubeconfig", kubeconfig, "-n", kube.ns]
    )
    out = capsys.readouterr().out
    assert code == 0 and f"downloaded to {tmp_path / 'cli' / str(step)} (every file matches manifest.json)" in out, out
    assert {"savedmodel", "tflite", "onnx"} <= set(out.split()), out

    # The same trained job: `tfps tensorboard` through the node's kubelet, and its export served the way
    # KServe lays out a pvc:// storage URI (TensorFlow's loader and ONNX Runtime, checked against the manifest).
    from serving_checks import served_from_the_claim, tensorboard_through_the_kubelet

    (events,) = [p for p in data.rglob("tensorboard/chief") if p.is_dir()]
    tb = tensorboard_through_the_kubelet(kube, "quickstart", kubeconfig, events, wait_until)
    manifest = json.loads((published / "manifest.json").read_text())
    # the InferenceService the operator made of the verified export: its storage URI is what is served
    isvc = wait_until(
        lambda: kube.custom.get_namespaced_custom_object(
            "serving.kserve.io", "v1beta1", kube.ns, "inferenceservices", "quickstart"
        ),
        timeout=60,
        interval=1,
        what="the InferenceService quickstart",
    )
    uri = isvc["spec"]["predictor"]["model"]["storageUri"]
    assert uri == f"pvc://{claim}/{kube.ns}/quickstart/exports/{step}/kserve/tensorflow", uri
    served = served_from_the_claim(
        kube, claim, "quickstart", step, manifest, TRAINER_IMAGE, ON_REAL_NODE, wait_until, {"tensorflow": uri}
    )
    arts = {a["format"]: (a["sha256"][:16], a["bytes"]) for a in manifest["artifacts"]}
    lineage = manifest["lineage"]
    print(
        f"\ntensorboard through the kubelet: {tb}\nInferenceService quickstart: storageUri {uri}, "
        f"modelFormat {isvc['spec']['predictor']['model']['modelFormat']}\n"
        f"  manifest.json of exports/{step}: complete {manifest.get('complete')}, artifacts {arts}, "
        f"lineage spec sha256 {lineage['spec']['sha256'][:16]}, image {lineage['image']['digest']}\n"
        f"served from {uri}: {served}"
    )

    # a file changed on the volume after the export: the download refuses it and names it
    tflite = next(p for p in published.rglob("*.tflite"))
    with tflite.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ChecksumMismatch, match=re.escape(tflite.name)):
        client.download_artifacts("quickstart", dest=tmp_path / "bad")
    assert not (tmp_path / "bad" / str(step)).exists()
    code = tfps(
        ["artifacts", "quickstart", "--download", str(tmp_path / "bad"), "--kubeconfig", kubeconfig, "-n", kube.ns]
    )
    assert code == ChecksumMismatch.exit_code, capsys.readouterr()
    readers_gone(kube, wait_until)


PROBE = r"""
import json, os, socket, sys, time, urllib.request
time.sleep(3)  # the policy engine learns this pod's IP from the API server (no NRI here)
out = {}
for name, ip, port, kind in json.loads(sys.argv[1]):
    res = "closed"
    for _ in range(3):
        try:
            if kind == "metrics":
                body = urllib.request.urlopen(f"http://{ip}:{port}/metrics", timeout=3).read().decode()
                res = "open" + (" tfps_step" if "tfps_step" in body else " (no tfps_step)")
            else:
                socket.create_connection((ip, port), timeout=3).close()
                res = "open"
            break
        except OSError as e:
            res = f"closed ({type(e).__name__})"
    out[name] = res
print(json.dumps(out))
if os.environ.get("PROBE_OUT"):
    open(os.environ["PROBE_OUT"], "w").write(json.dumps(out))
"""


def probe_pod(core: Any, ns: str, name: str, labels: dict[str, str], targets: list[list[Any]]) -> None:
    """A trainer-image pod (non-root) that tries each ``[name, ip, port, kind]`` target and writes
    ``{name: "open"|"closed (...)"}`` as its termination message."""
    import json

    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": name, "labels": labels},
            "spec": on_real_node(
                {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "main",
                            "image": TRAINER_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": ["python", "-c", PROBE, json.dumps(targets)],
                            "env": [{"name": "PROBE_OUT", "value": "/dev/termination-log"}],
                            "securityContext": {
                                "runAsUser": 1000,
                                "runAsNonRoot": True,
                                "allowPrivilegeEscalation": False,
                            },
                        }
                    ],
                }
            ),
        },
    )


def test_network_policy_is_enforced_between_real_pods(operated, realnode, cluster, wait_until):
    """kube-network-policies on the node: the job's gRPC port is reachable by the job's own pods only, the
    chief's progress port by the operator's pods and (opted in by spec.metrics.scrapeFrom) the scraper,
    which gets the trainer's metrics; a pod of another job or without labels reaches neither."""
    import json

    from tfps_operator.settings import OPERATOR_POD_LABELS
    from tfps_wire.job_settings import DEFAULT_PROGRESS_PORT

    kube, op, pv = operated
    pv(names.pvc_name("quickstart"))
    job = quickstart(steps=10 * LONG_STEPS, every=LONG_EVERY)  # still training when the last probe runs
    scraper_labels = {"app.kubernetes.io/name": "prometheus"}
    job["spec"]["metrics"] = {"scrapeFrom": {"podLabels": scraper_labels}}  # a scraper of the job's namespace
    kube.create_job(job)
    pods = wait_until(lambda: trainer_pods_running(kube, "quickstart", 4), timeout=300, interval=1, what="pods Running")
    ip = {
        p["metadata"]["labels"]["tfps.dev/replica-type"] + p["metadata"]["labels"]["tfps.dev/replica-index"]: p[
            "status"
        ]["podIP"]
        for p in pods.values()
    }
    # Running is not serving: the PS and workers listen once TensorFlow has started; a checkpoint means it has
    wait_until(lambda: chief_log_steps(kube.ns, "checkpoint step "), timeout=300, interval=1, what="a first checkpoint")
    np = kube.net.read_namespaced_network_policy(names.network_policy_name("quickstart"), kube.ns).to_dict()
    grpc = np["spec"]["ingress"][0]["ports"][0]["port"]
    operator_peer = np["spec"]["ingress"][1]["_from"][0]
    # the operator runs on the host here; a pod with its labels stands in for it (any namespace is admitted)
    assert operator_peer["pod_selector"]["match_labels"] == OPERATOR_POD_LABELS, operator_peer
    assert not (operator_peer["namespace_selector"] or {}).get("match_labels"), operator_peer
    targets = [
        ["ps-grpc", ip["ps0"], grpc, "tcp"],
        ["worker-grpc", ip["worker1"], grpc, "tcp"],
        ["chief-progress", ip["chief0"], DEFAULT_PROGRESS_PORT, "tcp"],
        ["chief-metrics", ip["chief0"], DEFAULT_PROGRESS_PORT, "metrics"],
    ]
    other_job = {
        "tfps.dev/job-name": "other",
        "app.kubernetes.io/managed-by": "tfps-operator",
        "tfps.dev/replica-type": "worker",
    }
    probes = {"other-job": other_job, "no-labels": {}, "operator": dict(OPERATOR_POD_LABELS), "scraper": scraper_labels}
    for name, labels in probes.items():
        probe_pod(kube.core, kube.ns, f"probe-{name}", labels, targets)
    # the job's own pod: from worker 0, through the API server's exec (kubelet on the node)
    own = cluster.kubectl(
        "-n",
        kube.ns,
        "exec",
        names.pod_name("quickstart", "worker", 0),
        "--",
        "python",
        "-c",
        PROBE,
        json.dumps(targets[:2]),
    )
    assert own.returncode == 0, own
    seen = {}
    for name in probes:
        done = wait_until(
            lambda n=name: pod_terminated(kube.core, kube.ns, f"probe-{n}"),
            timeout=180,
            interval=1,
            what=f"probe-{name} done",
        )
        assert done["exitCode"] == 0, done
        seen[name] = {k: v.split(" ")[0] for k, v in json.loads(done["message"]).items()}
        seen[name]["raw"] = done["message"]
    expected = {
        "other-job": {
            "ps-grpc": "closed",
            "worker-grpc": "closed",
            "chief-progress": "closed",
            "chief-metrics": "closed",
        },
        "no-labels": {
            "ps-grpc": "closed",
            "worker-grpc": "closed",
            "chief-progress": "closed",
            "chief-metrics": "closed",
        },
        "operator": {"ps-grpc": "closed", "worker-grpc": "closed", "chief-progress": "open", "chief-metrics": "open"},
        "scraper": {"ps-grpc": "closed", "worker-grpc": "closed", "chief-progress": "open", "chief-metrics": "open"},
    }
    assert {n: {k: v for k, v in s.items() if k != "raw"} for n, s in seen.items()} == expected, seen
    assert "tfps_step" in seen["scraper"]["raw"], seen["scraper"]["raw"]  # the trainer's metrics, scraped
    own_seen = {k: v.split(" ")[0] for k, v in json.loads(own.stdout.strip().splitlines()[-1]).items()}
    assert own_seen == {"ps-grpc": "open", "worker-grpc": "open"}, own.stdout


@pytest.fixture
def gcs_on_node(realnode, tmp_path):
    """fake-gcs-server on 127.0.0.1 and its TLS proxy (hack/lib/gcsproxy.py) on the node's bridge address
    only, the proxy's port opened to the node's pods (`hack/realnode/node host-port`); closed afterwards."""
    from support.gcs import GcsEmulator

    node = REPO / "hack" / "realnode" / "node"
    emu = GcsEmulator(tmp_path / "gcs", proxy_host=NODE_IP).start()
    try:
        subprocess.run([str(node), "host-port", "open", str(emu.proxy_port)], check=True, timeout=60)
        yield emu
    finally:
        subprocess.run([str(node), "host-port", "close", str(emu.proxy_port)], timeout=60)
        emu.stop()


GCS_CA_DIR = "/etc/tfps/gcs-ca"


def on_gcs(job: dict[str, Any], bucket: str, proxy_url: str, ca_config_map: str) -> dict[str, Any]:
    """``job`` with its files under gs://<bucket>/jobs, reached the way a user of a private endpoint would
    set it up: the chief's template (which the export Job takes too) gets HTTPS_PROXY, the CA bundle from a
    ConfigMap as CURL_CA_BUNDLE, and the emulator's test token instead of credentials."""
    job["spec"]["storage"] = {"uri": f"gs://{bucket}/jobs"}
    spec = job["spec"]["replicas"]["chief"].setdefault("template", {}).setdefault("spec", {})
    spec["volumes"] = [{"name": "gcs-ca", "configMap": {"name": ca_config_map}}]
    spec["volumeMounts"] = [{"name": "gcs-ca", "mountPath": GCS_CA_DIR, "readOnly": True}]
    spec["env"] = [
        {"name": "HTTPS_PROXY", "value": proxy_url},
        {"name": "CURL_CA_BUNDLE", "value": f"{GCS_CA_DIR}/ca.crt"},
        {"name": "GOOGLE_AUTH_TOKEN_FOR_TESTING", "value": "emulator"},
        {"name": "NO_GCE_CHECK", "value": "True"},
    ]
    return job


def test_a_gs_job_trains_checkpoints_and_exports_through_the_node_network(
    operated, realnode, gcs_on_node, kubeconfig, wait_until, tmp_path, capsys
):
    """spec.storage.uri gs:// on real pods: the chief and the export Job reach the emulator only through the
    proxy on the node's bridge address (no default route, nothing else of the host open to pods); the
    checkpoints, TensorBoard events and the export (manifest last, LATEST) land in the bucket, the job's
    status names them, and `tfps artifacts --download` reads the export through a reader pod that reaches
    the bucket the same way."""
    import hashlib
    import json
    import secrets

    from tfps_operator.tools.cli import main as tfps
    from tfps_operator.tools.client import NoExports, TFPSClient

    kube, op, _ = operated
    gcs = gcs_on_node
    bucket = gcs.create_bucket(f"tfps-{secrets.token_hex(4)}")
    kube.core.create_namespaced_config_map(
        kube.ns, {"metadata": {"name": "gcs-ca"}, "data": {"ca.crt": gcs.ca.read_text()}}
    )
    t0 = time.monotonic()
    kube.create_job(on_gcs(quickstart(), bucket, gcs.proxy_url, "gcs-ca"))
    pods = wait_until(
        lambda: trainer_pods_running(kube, "quickstart", 4), timeout=300, interval=1, what="4 pods Running"
    )
    for name, p in pods.items():
        env = {e["name"] for e in p["spec"]["containers"][0].get("env") or []}
        # only the chief touches the job's files: the proxy settings are its template's alone
        assert ("HTTPS_PROXY" in env) == ("-chief-" in name), (name, env)
        assert not any(v.get("persistentVolumeClaim") for v in p["spec"]["volumes"]), name
    st = quickstart_succeeded(kube, op, wait_until, "the gs:// quickstart Succeeded")
    t_done = time.monotonic() - t0
    steps = kube.job("quickstart")["spec"]["training"]["steps"]
    prefix = f"jobs/{kube.ns}/quickstart"
    objects = gcs.objects(bucket, f"{prefix}/")
    assert f"{prefix}/checkpoints/ckpt-{steps}.index" in objects, sorted(objects)
    assert any(n.startswith(f"{prefix}/checkpoints/ckpt-{steps}.data-") for n in objects), sorted(objects)
    assert any("/tensorboard/chief/events.out.tfevents." in n for n in objects), sorted(objects)
    assert (st.get("checkpoint") or {}).get("step") == steps, st
    assert (st["checkpoint"].get("path") or "").startswith(f"gs://{bucket}/{prefix}/checkpoints/ckpt-{steps}"), st
    export = st["export"]
    assert export["step"] == steps, export
    assert {a["format"] for a in export["artifacts"]} == {"savedmodel", "tflite", "onnx"}, export
    # published by the manifest rule: every artifact's checksum as the manifest says, then LATEST
    assert gcs.get(bucket, f"{prefix}/exports/LATEST").decode().strip() == str(steps)
    manifest = json.loads(gcs.get(bucket, f"{prefix}/exports/{steps}/manifest.json"))
    assert {a["format"] for a in manifest["artifacts"]} == {"savedmodel", "tflite", "onnx"}, manifest
    for a in manifest["artifacts"]:
        base = f"{prefix}/exports/{steps}/{a['path']}"
        for rel, digest in [(f"{base}/{f['path']}", f["sha256"]) for f in a.get("files", [])] or [(base, a["sha256"])]:
            assert hashlib.sha256(gcs.get(bucket, rel)).hexdigest() == digest, rel
    # the job's NetworkPolicy restricts ingress only: nothing in it stands between the chief and the proxy
    np = kube.net.read_namespaced_network_policy(names.network_policy_name("quickstart"), kube.ns).to_dict()
    assert np["spec"]["policy_types"] == ["Ingress"] and not np["spec"].get("egress"), np["spec"]
    # tfps artifacts --download: a reader pod with the chief's storage settings streams exports/<step>/ out of
    # the bucket; every file matches the bucket's object and manifest.json
    client = TFPSClient(kubeconfig=kubeconfig, namespace=kube.ns)
    got = client.download_artifacts("quickstart", dest=tmp_path / "dl")
    assert got == tmp_path / "dl" / str(steps)
    local = {str(p.relative_to(got)): p.read_bytes() for p in got.rglob("*") if p.is_file()}
    published = {n.split(f"/exports/{steps}/", 1)[1] for n in objects if f"/exports/{steps}/" in n}
    assert set(local) == published and "manifest.json" in local, (sorted(local), sorted(published))
    for rel, data in local.items():
        assert gcs.get(bucket, f"{prefix}/exports/{steps}/{rel}") == data, rel
    code = tfps(
        ["artifacts", "quickstart", "--download", str(tmp_path / "cli"), "--kubeconfig", kubeconfig, "-n", kube.ns]
    )
    out = capsys.readouterr().out
    assert code == 0 and f"downloaded to {tmp_path / 'cli' / str(steps)} (every file matches manifest.json)" in out
    with pytest.raises(NoExports, match=re.escape(f"has no export at step 7 (gs://{bucket}/{prefix}/exports/7)")):
        client.download_artifacts("quickstart", dest=tmp_path / "none", step=7)
    readers_gone(kube, wait_until)
    print(f"\ngs:// quickstart on the real node: Succeeded after {t_done:.0f}s, {len(objects)} objects in the bucket")


SCRIPTS = REPO / "tests" / "local" / "scripts"
PROGRAMS = {
    # name: (script, strategy, replicas, extra flags, final step)
    "ps-fit": ("ps_fit_tf_keras.py", "ParameterServer", {"chief": 1, "ps": 1, "worker": 2}, ["--log-dir"], 120),
    "mwms-fit": ("mwms_fit_tf_keras.py", "MultiWorkerMirrored", {"worker": 2}, ["--epochs", "3"], 90),
}


def program_job(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TFJob user's own program (tests/local/scripts) as a script-mode job on the real node, its code in a
    ConfigMap (as ``tfps submit --code`` ships it); returns (ConfigMap, job)."""
    script, strategy, replicas, extra, _ = PROGRAMS[name]
    flags = [f if f != "--log-dir" else "--log-dir=$(TFPS_TENSORBOARD_DIR)" for f in extra]
    command = [
        "python",
        script,
        *flags,
        "--checkpoint-dir",
        "$(TFPS_CHECKPOINT_DIR)",
        "--model-dir",
        "$(TFPS_MODEL_DIR)",
    ]
    config_map = {"metadata": {"name": f"{name}-code"}, "data": {script: (SCRIPTS / script).read_text()}}
    job = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "strategy": strategy,
            "model": {"command": command, "source": {"configMap": f"{name}-code"}},
            "replicas": {
                role: {"replicas": n, "template": {"spec": copy.deepcopy(ON_REAL_NODE)}} for role, n in replicas.items()
            },
            "storage": {"volumeClaimTemplate": {"accessModes": ["ReadWriteOnce"], "size": "1Gi"}},
            "export": {"formats": ["savedmodel", "tflite", "onnx"]},
            "runPolicy": {"backoffLimit": 1},
        },
    }
    return config_map, job


def program_succeeded(
    kube: Kube, op: Any, wait_until: Any, config_map: dict[str, Any], job: dict[str, Any]
) -> dict[str, Any]:
    """Create the program's code ConfigMap and its job; the job's status once it has finished, which must be
    Succeeded (else the operator's log)."""
    name = job["metadata"]["name"]
    kube.core.create_namespaced_config_map(kube.ns, config_map)
    kube.create_job(job)
    st = wait_until(
        lambda: (s := kube.status(name)).get("phase") in ("Succeeded", "Failed") and s,
        timeout=900,
        interval=2,
        what=f"{name} finished",
    )
    assert st["phase"] == "Succeeded", (st, op.log()[-3000:])
    return st


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_tfjob_users_own_program_trains_and_exports_on_real_pods(operated, name, wait_until):
    """A parameter-server ``model.fit`` program and a MultiWorkerMirrored one, unchanged, in real containers:
    the lead's checkpoints land on the volume and in the status, and the saved model is exported verified."""
    kube, op, pv = operated
    data = pv(names.pvc_name(name))
    config_map, job = program_job(name)
    t0 = time.monotonic()
    st = program_succeeded(kube, op, wait_until, config_map, job)
    final = PROGRAMS[name][4]
    assert st["restarts"] == 0 and st["checkpoint"]["step"] == final, st
    assert list(data.rglob("model/saved_model.pb")), sorted(str(p) for p in data.rglob("*"))[:50]
    export = st["export"]
    assert export["step"] == final and {a["format"] for a in export["artifacts"]} == {"savedmodel", "tflite", "onnx"}
    assert all(a["maxError"] is not None for a in export["artifacts"]), export
    assert not list(data.rglob("*workertemp*"))  # the other workers saved into temporary directories
    no_image_pulls(kube.core, kube.ns)
    print(f"\n{name} on the real node: Succeeded after {time.monotonic() - t0:.0f}s; export {export['artifacts']}")


def test_a_job_with_a_data_service_trains_through_losing_a_data_worker_and_its_dispatcher(operated, wait_until):
    """The tf.data service on real pods (docs/data-service.md): the dispatcher (its journal on the job's PV) and
    two data workers found by their DNS names; the training workers read the module's dataset through them.
    Deleting a data worker and then the dispatcher mid-run: each is recreated alone, training goes on, and the
    job succeeds without a restart."""
    kube, op, pv = operated
    data = pv(names.pvc_name("quickstart"))
    job = quickstart(steps=LONG_STEPS, every=LONG_EVERY)
    job["spec"]["export"] = {"enabled": False}
    for field, n in (("dispatcher", 1), ("dataWorker", 2)):
        job["spec"]["replicas"][field] = {"replicas": n, "template": {"spec": copy.deepcopy(ON_REAL_NODE)}}
    kube.create_job(job)
    wait_until(lambda: trainer_pods_running(kube, "quickstart", 7), timeout=300, interval=1, what="7 pods Running")
    wait_until(lambda: chief_log_steps(kube.ns, "checkpoint step "), timeout=300, interval=1, what="a first checkpoint")
    for victim in (names.pod_name("quickstart", "dataworker", 1), names.pod_name("quickstart", "dispatcher", 0)):
        uid = kube.trainer_pods("quickstart")[victim]["metadata"]["uid"]
        seen = len(chief_log_steps(kube.ns, "checkpoint step "))
        kube.core.delete_namespaced_pod(victim, kube.ns)
        wait_until(
            lambda v=victim, u=uid: (
                (p := kube.trainer_pods("quickstart").get(v))
                and p["metadata"]["uid"] != u
                and p["status"].get("phase") == "Running"
            ),
            timeout=300,
            interval=1,
            what=f"{victim} recreated",
        )
        wait_until(  # training went on with it gone and back
            lambda n=seen: len(chief_log_steps(kube.ns, "checkpoint step ")) > n,
            timeout=300,
            interval=1,
            what=f"a checkpoint after {victim} came back",
        )
    st = wait_until(
        lambda: (s := kube.status("quickstart")).get("phase") in ("Succeeded", "Failed") and s,
        timeout=1200,
        interval=2,
        what="job finished",
    )
    assert st["phase"] == "Succeeded", (st, op.log()[-3000:])
    assert st.get("restarts", 0) == 0, st
    assert LONG_STEPS in chief_log_steps(kube.ns, "completed step ")
    pattern = f"{kube.ns}_{names.pod_name('quickstart', 'chief', 0)}_*/*/*.log"
    chief = "".join(f.read_text(errors="replace") for f in Path("/var/log/pods").glob(pattern))
    assert "registered with the tf.data service at quickstart-dispatcher-0.quickstart." in chief, chief[-2000:]
    assert list(data.rglob("tf_data_dispatcher_journal")), sorted(str(p) for p in data.rglob("*"))[:50]
    no_image_pulls(kube.core, kube.ns)


def test_a_program_saving_to_its_own_claim_is_followed_and_exported_from_there(operated, wait_until):
    """Kubeflow's MultiWorkerMirrored Keras example's shape: the program's --checkpoint-dir and --model-dir on a
    claim of the user's, mounted at /train; spec.model.directories names them. The lead's checkpoints reach the
    status from there, and the export Job mounts that claim read-only and exports the model saved there."""
    kube, op, pv = operated
    name = "own-dirs"
    pv(names.pvc_name(name))
    train = pv("strategy-volume")
    kube.core.create_namespaced_persistent_volume_claim(
        kube.ns,
        {
            "metadata": {"name": "strategy-volume"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": f"{kube.ns}-strategy-volume",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    config_map, job = program_job("mwms-fit")
    config_map["metadata"]["name"] = f"{name}-code"
    job["metadata"]["name"] = name
    spec = job["spec"]
    spec["model"]["source"] = {"configMap": f"{name}-code"}
    command = spec["model"]["command"]
    command[command.index("$(TFPS_CHECKPOINT_DIR)")] = "/train/checkpoint"
    command[command.index("$(TFPS_MODEL_DIR)")] = "/train/saved_model"
    spec["model"]["directories"] = {"checkpoints": "/train/checkpoint", "savedModel": "/train/saved_model"}
    template = spec["replicas"]["worker"]["template"]["spec"]
    template["volumes"] = [{"name": "training", "persistentVolumeClaim": {"claimName": "strategy-volume"}}]
    template["volumeMounts"] = [{"name": "training", "mountPath": "/train"}]
    t0 = time.monotonic()
    st = program_succeeded(kube, op, wait_until, config_map, job)
    final = PROGRAMS["mwms-fit"][4]
    assert st["checkpoint"]["step"] == final and st["checkpoint"]["path"] == "/train/checkpoint/weights", st
    assert (train / "saved_model" / "saved_model.pb").is_file(), sorted(str(p) for p in train.rglob("*"))[:50]
    export = st["export"]
    assert export["step"] == final and {a["format"] for a in export["artifacts"]} == {"savedmodel", "tflite", "onnx"}
    assert all(a["maxError"] is not None for a in export["artifacts"]), export
    job_obj = kube.batch.read_namespaced_job(names.export_job_name(name), kube.ns)
    (mount,) = [m for m in job_obj.spec.template.spec.containers[0].volume_mounts if m.name == "training"]
    assert mount.read_only and mount.mount_path == "/train", mount
    assert not list(train.rglob("*workertemp*"))
    no_image_pulls(kube.core, kube.ns)
    print(f"\nown directories on the real node: Succeeded after {time.monotonic() - t0:.0f}s; {export['artifacts']}")
