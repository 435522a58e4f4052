"""Hypothesis strategies: valid PSTrainingJobs (wire form), the status the operator may have written,
the children it may observe, and malformed bodies that an older or looser CRD could have stored.

Validity is not assumed: every generated "valid" job is passed through ``validate_job`` by the tests
(the API server's rules, CEL included), so a generator bug shows up as a failing test, not a
silently narrower search.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from tfps_operator.manifests import names
from tfps_operator.manifests.labels import EXPORT_COMPONENT, base_labels, pod_labels
from tfps_wire.job_settings import DEFAULT_PROGRESS_PORT

UID = "5e1f0000-0000-4000-8000-00000000beef"

_lower = string.ascii_lowercase
_dns_tail = _lower + string.digits + "-"


@st.composite
def job_names(draw: st.DrawFn) -> str:
    """DNS-1035 labels of 1..49 characters (names.MAX_JOB_NAME)."""
    n = draw(st.integers(1, names.MAX_JOB_NAME))
    first = draw(st.sampled_from(_lower))
    if n == 1:
        return first
    middle = draw(st.text(_dns_tail, min_size=n - 2, max_size=n - 2))
    last = draw(st.sampled_from(_lower + string.digits))
    return first + middle + last


label_values = st.sampled_from(["", "a", "vision", "other-job", "tfps-operator", "x.y_z-1", "A" * 63])
env_names = st.sampled_from(["A", "LOG_LEVEL", "TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH", "X1", "HOME_DIR", "TFPSX"])
quantities = st.sampled_from(["1", "500m", "2Gi", "128Mi", 1, 2, "0.5"])

# (limit, request) pairs with request <= limit, in mixed notations (compared as quantities, not strings).
_BELOW_LIMIT = [
    ("1", "1000m"),
    ("1", "500m"),
    (2, "1.5"),
    ("2", 2),
    ("1Gi", "1024Mi"),
    ("1Gi", "1G"),
    ("4Gi", 1024),
    ("500m", "0.5"),
    ("1.5", "1500m"),
    ("128Mi", "128Mi"),
]
# (limit, request) pairs of an extended resource: whole numbers, the request equal to the limit.
_EQUAL_WHOLE = [(1, "1"), ("2", 2), ("4", "4"), (8, 8), ("1k", "1e3")]


@st.composite
def valid_resources(draw: st.DrawFn) -> dict[str, Any]:
    """Resources a Pod may have: cpu/memory/ephemeral-storage limits and/or requests (a request at
    most its limit), and an extended resource (nvidia.com/gpu) as a whole-number limit, its request
    absent (it defaults to the limit) or equal to it."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(["cpu", "memory", "ephemeral-storage"]), unique=True, max_size=3)):
        how = draw(st.sampled_from(["limit", "request", "both"]))
        if how == "request":
            requests[name] = draw(quantities)
            continue
        limit, request = draw(st.sampled_from(_BELOW_LIMIT))
        limits[name] = limit
        if how == "both":
            requests[name] = request
    if draw(st.booleans()):
        name = draw(st.sampled_from(["nvidia.com/gpu", "example.com/fpga"]))
        limits[name], request = draw(st.sampled_from(_EQUAL_WHOLE))
        if draw(st.booleans()):
            requests[name] = request
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def resources() -> st.SearchStrategy[dict[str, Any] | None]:
    return st.none() | valid_resources()


_ANY_NAMES = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "hugepages-2Mi",
    "nvidia.com/gpu",
    "example.com/fpga",
    "kubernetes.io/foo",
    "gpu",
    "cpus",
]
_ANY_QUANTITIES = [
    "0",
    "1",
    1,
    2,
    "2",
    "1000m",
    "500m",
    "1.5",
    "1.0",
    "1001m",
    "1k",
    "1e3",
    "1Gi",
    "1024Mi",
    "1025Mi",
    "1G",
    "2Mi",
    "4Mi",
    "1Mi",
    1024,
    "0.5",
    "1.5Gi",
    "3",
]


@st.composite
def any_resources(draw: st.DrawFn) -> dict[str, Any]:
    """Resources that may or may not be valid in a Pod: requests without limits, above or below them,
    fractional or milli-written extended resources, hugepages, non-standard names."""
    out: dict[str, Any] = {}
    for part in ("limits", "requests"):
        if draw(st.booleans()):
            out[part] = draw(
                st.dictionaries(st.sampled_from(_ANY_NAMES), st.sampled_from(_ANY_QUANTITIES), min_size=1, max_size=3)
            )
    if "limits" in out and "requests" in out and draw(st.booleans()):  # often the same names in both
        out["requests"] = {k: draw(st.sampled_from(_ANY_QUANTITIES)) for k in out["limits"]}
    return out


@st.composite
def templates(draw: st.DrawFn) -> dict[str, Any] | None:
    """A replica template that stays inside what PodSecurity ``restricted`` admits (no security overrides
    that loosen it) — user labels may try to shadow the operator's own labels (those under tfps.dev/ the
    schema refuses; app.kubernetes.io/managed-by the builder overrides)."""
    if not draw(st.booleans()):
        return None
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["labels"] = draw(
            st.dictionaries(
                st.sampled_from(["team", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "x"]),
                label_values,
                max_size=3,
            )
        )
    if draw(st.booleans()):
        meta["annotations"] = draw(
            st.dictionaries(st.sampled_from(["note", "sidecar.istio.io/inject"]), label_values, max_size=2)
        )
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["env"] = [{"name": n, "value": "v"} for n in draw(st.lists(env_names, max_size=3, unique=True))]
    if draw(st.booleans()):
        spec["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
    if draw(st.booleans()):
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    if draw(st.booleans()):
        spec["resources"] = draw(valid_resources())
    if draw(st.booleans()):
        spec["securityContext"] = {"readOnlyRootFilesystem": True}
    out: dict[str, Any] = {}
    if meta:
        out["metadata"] = meta
    if spec:
        out["spec"] = spec
    return out


@st.composite
def replica(draw: st.DrawFn, lo: int, hi: int) -> dict[str, Any]:
    r: dict[str, Any] = {"replicas": draw(st.integers(lo, hi))}
    if draw(st.booleans()):
        r["restartPolicy"] = draw(st.sampled_from(["OnFailure", "Never", "ExitCode"]))
    res = draw(resources())
    if res:
        r["resources"] = res
    tpl = draw(templates())
    if tpl is not None:
        r["template"] = tpl
    return r


@st.composite
def valid_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A PSTrainingJob the API server accepts (checked by the tests with validate_job)."""
    evaluator = draw(st.integers(0, 1))
    every_steps = draw(st.none() | st.integers(1, 10_000))
    every_seconds = draw(st.none() | st.integers(1, 3600)) if every_steps is not None else draw(st.integers(1, 3600))
    checkpoint: dict[str, Any] = {"keep": draw(st.integers(1, 20))}
    if every_steps is not None:
        checkpoint["everySteps"] = every_steps
    if every_seconds is not None:
        checkpoint["everySeconds"] = every_seconds
    steps = draw(st.integers(1, 10**7))
    if evaluator and "everySeconds" not in checkpoint:  # CEL: an evaluator needs checkpoints during training
        steps = max(steps, every_steps + 1)  # type: ignore[operator]
    training: dict[str, Any] = {
        "steps": steps,
        "batchSize": draw(st.integers(1, 4096)),
        "checkpoint": checkpoint,
        "checkNumerics": draw(st.booleans()),
        "port": draw(st.integers(1024, 65535).filter(lambda p: p != DEFAULT_PROGRESS_PORT)),
    }
    if draw(st.booleans()):
        training["variablePartitioner"] = {"maxShards": draw(st.integers(1, 8))}
    if draw(st.booleans()):
        training["seed"] = draw(st.integers(0, 2**31))
    storage = draw(
        st.sampled_from(
            [
                {"claimName": "data"},
                {"claimName": "data", "mountPath": "/data"},
                {"volumeClaimTemplate": {"size": "1Gi"}},
                {"volumeClaimTemplate": {"size": "5Gi", "storageClassName": "fast", "accessModes": ["ReadWriteOnce"]}},
            ]
        )
    )
    formats = draw(st.lists(st.sampled_from(["savedmodel", "tflite", "onnx"]), min_size=1, max_size=3, unique=True))
    quant = draw(st.sampled_from(["none", "dynamic", "float16", "int8"]))
    export: dict[str, Any] = {
        "enabled": draw(st.booleans()),
        "formats": formats,
        "tflite": {"quantization": quant, "calibrationSamples": 64 if quant == "int8" else 0},
        "backoffLimit": draw(st.integers(0, 10)),
    }
    if draw(st.booleans()):
        export["resources"] = draw(valid_resources())
    run_policy: dict[str, Any] = {
        "backoffLimit": draw(st.integers(0, 100)),
        "cleanPodPolicy": draw(st.sampled_from(["All", "Running", "None"])),
        "suspend": draw(st.booleans()),
    }
    if draw(st.booleans()):
        run_policy["activeDeadlineSeconds"] = draw(st.integers(1, 10**6))
    if draw(st.booleans()):
        run_policy["ttlSecondsAfterFinished"] = draw(st.integers(0, 10**5))
    if draw(st.booleans()):
        run_policy["schedulerName"] = "volcano"
    spec: dict[str, Any] = {
        "model": {
            "module": draw(st.sampled_from(["tfps_trainer.examples.linear", "mymodel", "a.b_c.d"])),
            "args": draw(
                st.dictionaries(
                    st.sampled_from(["lr", "features", "layers"]),
                    st.integers(0, 9) | st.floats(0, 1) | st.lists(st.integers(1, 64), max_size=3),
                    max_size=3,
                )
            ),
        },
        "replicas": {
            "chief": draw(replica(1, 1)),
            "ps": draw(replica(1, 4)),
            "worker": draw(replica(1, 6)),
            "evaluator": draw(replica(evaluator, evaluator)),
        },
        "training": training,
        "storage": storage,
        "export": export,
        "runPolicy": run_policy,
    }
    if draw(st.booleans()):
        spec["image"] = "registry.example/trainer:1"
    return {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {
            "name": draw(job_names()),
            "namespace": draw(st.sampled_from(["default", "team-a"])),
            "uid": UID,
            "generation": draw(st.integers(1, 50)),
        },
        "spec": spec,
    }


# --- what the operator may observe ------------------------------------------------------------------

PHASES = st.sampled_from([None, "Pending", "Running", "Restarting", "Exporting", "Succeeded", "Failed", "Suspended"])


@st.composite
def statuses(draw: st.DrawFn) -> dict[str, Any]:
    """A status the operator (any version) may have written, as stored on the API server."""
    st_: dict[str, Any] = {"restarts": draw(st.integers(0, 5))}
    phase = draw(PHASES)
    if phase:
        st_["phase"] = phase
    if draw(st.booleans()):
        st_["startTime"] = draw(
            st.sampled_from(["2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z", "2020-01-01T00:00:00Z"])
        )
    if phase in ("Succeeded", "Failed") and draw(st.booleans()):
        st_["completionTime"] = "2026-01-01T11:30:00Z"
    if phase == "Exporting" and draw(st.booleans()):
        st_["export"] = {"jobName": "whatever-export"}
    if draw(st.booleans()):
        st_["conditions"] = [
            {
                "type": draw(st.sampled_from(["Running", "Created", "Failed", "Restarting"])),
                "status": draw(st.sampled_from(["True", "False", "Unknown"])),
                "reason": "R",
            }
        ]
    return st_


TERMINATED_MESSAGES = st.sampled_from(
    [
        "",
        "OOMKilled",
        "tfps-trainer chief/0: lost parameter server ps/0",
        '{"ok":true,"step":10,"path":"exports/10","manifest":"exports/10/manifest.json","artifacts":[]}',
        '{"ok":false,"reason":"VerificationFailed","message":"onnx: too far"}',
        '{"ok":tru',
        "\x00\xff garbage",
        "x" * 5000,
    ]
)


@st.composite
def raw_pod(draw: st.DrawFn, job: str, role: str, index: int, restart_max: int) -> dict[str, Any]:
    name = names.pod_name(job, role, index)  # type: ignore[arg-type]
    phase = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", None]))
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}-{draw(st.integers(0, 10**6))}",
        "labels": pod_labels(job, role, index, draw(st.integers(0, restart_max))),
    }  # type: ignore[arg-type]
    if draw(st.integers(0, 9)) == 0:
        meta["labels"]["tfps.dev/restart"] = draw(st.sampled_from(["", "x", "-1", "99999999999999999999"]))
    if draw(st.integers(0, 4)) == 0:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if draw(st.booleans()):
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": draw(st.sampled_from(["True", "False"])),
                "message": "0/2 nodes are available",
            },
            {"type": "Ready", "status": draw(st.sampled_from(["True", "False"]))},
        ]
    if phase in ("Failed", "Succeeded") or draw(st.integers(0, 5)) == 0:
        term: dict[str, Any] = {
            "exitCode": draw(st.sampled_from([0, 1, 2, 5, 7, 137, 143, 255])),
            "message": draw(TERMINATED_MESSAGES),
        }
        if draw(st.booleans()):
            term["finishedAt"] = f"2026-01-01T12:00:0{draw(st.integers(0, 9))}Z"
        key = draw(st.sampled_from(["state", "lastState"]))
        status["containerStatuses"] = [{"name": "trainer", key: {"terminated": term}}]
    return {"metadata": meta, "spec": {"nodeName": "kwok-node-0"} if draw(st.booleans()) else {}, "status": status}


@st.composite
def observed_children(
    draw: st.DrawFn, job: dict[str, Any], restart_max: int
) -> tuple[list[dict], dict | None, set[str]]:
    """Raw pods (a random subset, any phase, any restart label, extra indexes beyond the spec),
    a raw export Job (absent, running, complete or failed) and which infra children exist."""
    name = job["metadata"]["name"]
    r = job["spec"]["replicas"]
    slots = [
        (role, i)
        for role in ("chief", "ps", "worker", "evaluator")
        for i in range(r.get(role, {}).get("replicas", 0) + (1 if role in ("ps", "worker") else 0))
    ]
    chosen = draw(st.lists(st.sampled_from(slots), unique=True, max_size=len(slots))) if slots else []
    pods = [draw(raw_pod(name, role, i, restart_max)) for role, i in chosen]
    if draw(st.booleans()):  # export pods
        for k in range(draw(st.integers(1, 2))):
            phase = draw(st.sampled_from(["Running", "Succeeded", "Failed"]))
            st_: dict[str, Any] = {"phase": phase}
            if phase != "Running":
                st_["containerStatuses"] = [
                    {
                        "name": "trainer",
                        "state": {
                            "terminated": {
                                "exitCode": 0 if phase == "Succeeded" else draw(st.sampled_from([1, 5, 7, 9, 137])),
                                "message": draw(TERMINATED_MESSAGES),
                            }
                        },
                    }
                ]
            pods.append(
                {
                    "metadata": {
                        "name": f"{names.export_job_name(name)}-{k}",
                        "uid": f"uid-exp-{k}",
                        "labels": base_labels(name, EXPORT_COMPONENT),
                    },
                    "status": st_,
                }
            )
    export_job = None
    if draw(st.booleans()):
        cond = draw(st.sampled_from([None, "Complete", "Failed"]))
        export_job = {
            "metadata": {"name": names.export_job_name(name), "uid": "uid-export-job"},
            "status": {
                "conditions": [{"type": cond, "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}]
                if cond
                else []
            },
        }
    infra = {
        f"Service/{names.service_name(name)}",
        f"NetworkPolicy/{names.network_policy_name(name)}",
        f"PersistentVolumeClaim/{names.pvc_name(name)}",
    }
    existing = set(draw(st.lists(st.sampled_from(sorted(infra)), unique=True)))
    return pods, export_job, existing


# --- malformed bodies ---------------------------------------------------------------------------------

json_leaves = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=12)
)
json_values = st.recursive(
    json_leaves,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)


@st.composite
def mangled_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A valid job with one to three subtrees of ``spec``/``metadata`` replaced by arbitrary JSON,
    deleted, or retyped: what an older or looser CRD (or none at all) could have let through."""
    body = draw(valid_jobs())
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(body.get("spec"), ("spec",))) + [("metadata", "name"), ("spec",)]
        path = draw(st.sampled_from(paths))
        parent: Any = body
        for key in path[:-1]:
            parent = parent[key]
        how = draw(st.sampled_from(["replace", "delete"]))
        if how == "delete" and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(json_values)
    return body


def _paths(node: Any, prefix: tuple) -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))
