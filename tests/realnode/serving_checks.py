"""Checks the real-node tier runs on a job it has already trained and exported (no training of their own):

- ``tfps tensorboard`` reached through the real kubelet's port-forward serves the chief's scalars;
- the export is "served": with no serving image to pull here, a pod mounts the claim the way KServe lays
  out a ``pvc://`` storage URI (the runtime's base path at ``/mnt/models``, read-only) and loads each model
  as its runtime would pick it (the highest version directory) with TensorFlow's loader and ONNX Runtime;
  what it loaded must match the export's ``manifest.json`` (checksums, inputs, outputs) and both runtimes
  must answer the same inputs alike.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tfps_operator.manifests.pods import container_security_context, pod_security_context
from tfps_operator.settings import BuildConfig
from tfps_wire import serving_layout

REPO = Path(__file__).resolve().parents[2]
TFPS = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())"]


def tensorboard_through_the_kubelet(
    kube: Any, job: str, kubeconfig: str, events_dir: Path, wait_until: Any
) -> dict[str, Any]:
    """Run ``tfps tensorboard JOB``; fetch the chief's loss through the printed URL (port-forward through
    the API server and the node's kubelet into the pod's loopback); SIGINT deletes the pod. Returns
    timings."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    from tfps_operator.manifests.tensorboard_pod import TENSORBOARD_LABEL

    written = [
        (e.step, float(tensor_util.make_ndarray(v.tensor)))
        for f in sorted(events_dir.glob("events.out.tfevents.*"))
        for e in EventFileLoader(str(f)).Load()
        for v in e.summary.value
        if v.tag == "loss"
    ]
    assert written, sorted(events_dir.iterdir())
    t0 = time.monotonic()
    tb = subprocess.Popen(
        [*TFPS, "tensorboard", job, "--kubeconfig", kubeconfig, "-n", kube.ns, "--timeout", "240"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = tb.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("TensorBoard at http://127.0.0.1:"), (line, tb.poll())
        t_url = time.monotonic() - t0
        url = line.split()[2]
        (pod,) = kube.pods(f"{TENSORBOARD_LABEL}={job}")
        body = kube.core.read_namespaced_pod(pod, kube.ns)
        assert body.spec.node_name and body.status.pod_ip, body.status
        query = urllib.parse.urlencode({"run": f"{job}/chief", "tag": "loss"})
        with urllib.request.urlopen(f"{url}data/plugin/scalars/scalars?{query}", timeout=60) as r:
            served = [(step, value) for _, step, value in json.load(r)]
        assert [s for s, _ in served] == [s for s, _ in written], (served, written)
        assert [v for _, v in served] == pytest.approx([v for _, v in written], rel=1e-6)
        with urllib.request.urlopen(url, timeout=60) as r:  # the page itself, as a browser gets it
            page = r.read().decode(errors="replace")
        assert r.status == 200 and "tensorboard" in page.lower(), page[:500]
        if shot := os.environ.get("TFPS_TENSORBOARD_SCREENSHOT"):  # an image of the page, for a person to see
            screenshot(url + "#timeseries", Path(shot))
    finally:
        tb.send_signal(signal.SIGINT)
        _, err = tb.communicate(timeout=60)
    assert tb.returncode == 0, err
    wait_until(
        lambda: not kube.pods(f"{TENSORBOARD_LABEL}={job}"), timeout=60, interval=1, what="TensorBoard pod deleted"
    )
    return {"url_after_s": round(t_url, 1), "node": body.spec.node_name, "points": len(served)}


def screenshot(url: str, out: Path) -> None:
    """Headless Chromium's picture of ``url`` (hack/chromium installs it); WebGL off, so that TensorBoard
    draws its charts with its fallback renderer."""
    found = subprocess.run([str(REPO / "hack" / "chromium")], capture_output=True, text=True, timeout=600)
    assert found.returncode == 0, found.stderr
    browser = [found.stdout.strip(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-webgl"]
    browser += ["--hide-scrollbars", "--window-size=1400,900", "--virtual-time-budget=60000"]
    subprocess.run([*browser, f"--screenshot={out}", url], capture_output=True, timeout=120, check=True)
    assert out.stat().st_size > 10_000, out


SERVE_PROBE = r"""
import json, os, sys
from pathlib import Path
import numpy as np
from tfps_wire.export_manifest import digest, file_sha256

runtime = sys.argv[1]
feeds = {k: np.asarray(v["values"], dtype=v["dtype"]) for k, v in json.loads(os.environ["INPUTS"]).items()}
base = Path("/mnt/models")
out = {"runtime": runtime, "entries": sorted(p.name for p in base.iterdir())}
if runtime == "tensorflow":
    # TF Serving's default version policy: the highest numbered directory under --model_base_path
    v = max(int(p.name) for p in base.iterdir() if p.name.isdigit())
    out["version"] = v
    out["bytes"], out["sha256"], _ = digest(base / str(v))
    import tensorflow as tf
    fn = tf.saved_model.load(str(base / str(v))).signatures["serving_default"]
    out["inputs"] = {k: s.dtype.name for k, s in fn.structured_input_signature[1].items()}
    res = fn(**{k: tf.constant(a) for k, a in feeds.items()})
    out["outputs"] = {k: t.numpy().tolist() for k, t in res.items()}
else:
    model = base / "model"  # Triton's repository: <model>/config.pbtxt, <model>/<version>/model.onnx
    out["config"] = (model / "config.pbtxt").read_text()
    v = max(int(p.name) for p in model.iterdir() if p.name.isdigit())
    out["version"] = v
    f = model / str(v) / "model.onnx"
    out["bytes"], out["sha256"] = f.stat().st_size, file_sha256(f)
    import onnxruntime as ort
    s = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"])
    out["inputs"] = {i.name: i.type for i in s.get_inputs()}
    names = [o.name for o in s.get_outputs()]
    out["outputs"] = dict(zip(names, (r.tolist() for r in s.run(names, feeds))))
print("SERVED " + json.dumps(out), flush=True)
"""


def _inputs(signature: dict[str, Any], batch: int = 5) -> dict[str, dict[str, Any]]:
    """Inputs for the manifest's signature: normal floats, small non-negative integers (valid ids)."""
    rng = np.random.default_rng(7)
    out = {}
    for i in signature["inputs"]:
        shape = [batch] + [d or 1 for d in i["shape"][1:]]
        kind = np.dtype(i["dtype"]).kind
        values = rng.normal(size=shape) if kind == "f" else rng.integers(0, 4, size=shape)
        out[i["name"]] = {"dtype": i["dtype"], "values": values.astype(i["dtype"]).tolist()}
    return out


def served_from_the_claim(
    kube: Any,
    claim: str,
    job: str,
    step: int,
    manifest: dict[str, Any],
    image: str,
    placement: dict[str, Any],
    wait_until: Any,
    uris: dict[str, str],
) -> dict[str, Any]:
    """A pod with one container per runtime, each with the runtime's base path of the export mounted
    read-only at ``/mnt/models`` as KServe mounts a ``pvc://`` storage URI: ``uris[runtime]`` (the one an
    InferenceService names), else the one the export's layout gives; returns what each loaded."""
    mounts = {}
    for runtime in ("tensorflow", "onnx"):
        uri = uris.get(runtime) or serving_layout.base_path(
            f"pvc://{claim}/{kube.ns}/{job}/exports/{step}",
            runtime,  # type: ignore[arg-type]
        )
        got_claim, sub = uri.removeprefix("pvc://").split("/", 1)
        assert got_claim == claim, uri
        mounts[runtime] = sub
    feeds = _inputs(manifest["signature"])
    name = f"{job}-served"
    t0 = time.monotonic()
    cfg = BuildConfig()

    def container(runtime: str) -> dict[str, Any]:
        return {
            "name": runtime,
            "image": image,
            "command": ["python", "-c", SERVE_PROBE, runtime],
            "env": [{"name": "INPUTS", "value": json.dumps(feeds)}, {"name": "HOME", "value": "/tmp"}],
            "securityContext": container_security_context(),
            "resources": {"limits": {"memory": "2Gi"}},
            "volumeMounts": [
                {"name": "models", "mountPath": "/mnt/models", "subPath": mounts[runtime], "readOnly": True},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        }

    kube.core.create_namespaced_pod(
        kube.ns,
        {
            "metadata": {"name": name},
            "spec": {
                **placement,
                "restartPolicy": "Never",
                "activeDeadlineSeconds": 600,
                "automountServiceAccountToken": False,
                "securityContext": pod_security_context(cfg),
                "volumes": [
                    {"name": "models", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
                    {"name": "tmp", "emptyDir": {}},
                ],
                "containers": [container("tensorflow"), container("onnx")],
            },
        },
    )
    p = wait_until(
        lambda: (p := kube.core.read_namespaced_pod(name, kube.ns)).status.phase in ("Succeeded", "Failed") and p,
        timeout=300,
        interval=1,
        what="the serving probe pod ended",
    )
    results = {}
    for runtime in ("tensorflow", "onnx"):
        log = kube.core.read_namespaced_pod_log(name, kube.ns, container=runtime)  # through the node's kubelet
        lines = [ln for ln in log.splitlines() if ln.startswith("SERVED ")]
        assert p.status.phase == "Succeeded" and lines, (runtime, p.status.phase, log[-3000:])
        results[runtime] = json.loads(lines[-1].removeprefix("SERVED "))
    kube.core.delete_namespaced_pod(name, kube.ns, grace_period_seconds=0)

    arts = {a["format"]: a for a in manifest["artifacts"]}
    tf_got, onnx_got = results["tensorflow"], results["onnx"]
    # what the runtime picked is the export's one version, and its bytes are the verified artifact's
    assert tf_got["entries"] == [str(tf_got["version"])] and onnx_got["entries"] == ["model"], results
    assert tf_got["version"] == onnx_got["version"] == step, (step, results)
    assert (tf_got["sha256"], tf_got["bytes"]) == (arts["savedmodel"]["sha256"], arts["savedmodel"]["bytes"])
    assert (onnx_got["sha256"], onnx_got["bytes"]) == (arts["onnx"]["sha256"], arts["onnx"]["bytes"])
    assert onnx_got["config"] == serving_layout.triton_config()
    # the manifest's inputs and outputs are what each runtime takes and gives
    for fmt, got in (("savedmodel", tf_got), ("onnx", onnx_got)):
        assert set(got["inputs"]) == {i["name"] for i in arts[fmt]["inputs"]}, (fmt, got["inputs"])
        assert set(got["outputs"]) == {o["name"] for o in arts[fmt]["outputs"]}, (fmt, got["outputs"])
    # and both answer the same inputs alike, within the bound the export verified ONNX to
    bound = max(float(arts["onnx"]["verification"]["maxAbsError"]) * 10, 1e-5)
    for out in tf_got["outputs"]:
        a, b = np.asarray(tf_got["outputs"][out]), np.asarray(onnx_got["outputs"][out])
        assert a.shape == b.shape and np.max(np.abs(a - b)) <= bound, (out, a, b, bound)
    return {
        "version": tf_got["version"],
        "savedmodel_sha256": tf_got["sha256"],
        "onnx_sha256": onnx_got["sha256"],
        "pod_s": round(time.monotonic() - t0, 1),
    }
