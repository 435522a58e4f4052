"""`tfps convert tfjob.yaml`: a Kubeflow TFJob (``kubeflow.org/v1``) as a PSTrainingJob in script mode.

Pure: :func:`convert` maps the TFJob document to a PSTrainingJob document and lists every field it
could not carry over (:class:`NotCarried`); :func:`render` prints the YAML with those fields in a
comment at the top; :func:`main` also names them on stderr. The result is validated with the API's
own rules before it is printed, so what comes out is a job the API server accepts.

What maps (TFJob field -> PSTrainingJob field):

- ``tfReplicaSpecs.{PS,Worker,Chief,Master,Evaluator}`` -> ``replicas.{ps,worker,chief,chief,evaluator}``:
  ``replicas`` (TFJob default 1), ``restartPolicy`` (TFJob default Never; Always becomes OnFailure, the
  nearest: a replica that succeeded is not restarted here), the ``tensorflow`` container's
  ``image`` (``spec.image`` when every replica type has the same), ``command`` + ``args`` (the program:
  ``spec.model.command`` when the same everywhere, else per replica type ``template.spec.command``),
  ``env`` (``TF_USE_LEGACY_KERAS`` becomes ``model.keras``; without it the job runs Keras 2, as a
  TensorFlow <= 2.15 program expects), ``resources``, ``volumeMounts``, ``securityContext``, the
  ``tfjob-port`` port (``training.port``); the pod's ``nodeSelector``, ``tolerations``, ``affinity``,
  ``topologySpreadConstraints``, ``priorityClassName``, ``imagePullSecrets``, ``serviceAccountName``,
  ``automountServiceAccountToken``, ``initContainers``, ``volumes``, ``securityContext``, and the
  template's labels and annotations; ``schedulerName`` -> ``runPolicy.schedulerName``.
- ``runPolicy``: ``cleanPodPolicy`` (TFJob default Running), ``backoffLimit``, ``activeDeadlineSeconds``,
  ``ttlSecondsAfterFinished``, ``suspend``; ``schedulingPolicy``'s ``minAvailable``, ``priorityClass`` and
  ``scheduleTimeoutSeconds`` (gang scheduling, when the operator has it enabled) and ``queue`` (Kueue,
  when the operator integrates with it).

Not carried over (named): ``schedulingPolicy.minResources``,
``runPolicy.managedBy``, ``successPolicy``, ``enableDynamicWorker``, containers other than
``tensorflow`` (sidecars), and every other pod or container field (``workingDir``, probes, ``ports``
other than tfjob-port, ``hostNetwork``...). Refused (no job printed): not a TFJob, no Chief/Master
(a ParameterServerStrategy job needs its coordinator), a replica type this project does not have, no
PS or Worker, a program that cannot be told (no ``command`` and no ``args``).

The export is left disabled (``export.enabled: false``): an unchanged TFJob program does not save its
model to ``$(TFPS_MODEL_DIR)``; enable it once it does.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..api.validate import JobValidationError, validate_job

TFJOB_API_VERSION = "kubeflow.org/v1"
CONTAINER = "tensorflow"
"""The container of a TFJob replica that runs TensorFlow (TFJob's default container name)."""
PORT_NAME = "tfjob-port"
ROLES = {"ps": "ps", "worker": "worker", "chief": "chief", "master": "chief", "evaluator": "evaluator"}
ROLE_ORDER = ("chief", "ps", "worker", "evaluator")
RESTART = {"OnFailure": "OnFailure", "Never": "Never", "ExitCode": "ExitCode", "Always": "OnFailure"}
TFJOB_DEFAULT_RESTART = "Never"
TFJOB_DEFAULT_CLEAN_POD_POLICY = "Running"
RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "cleanPodPolicy",
    "backoffLimit": "backoffLimit",
    "activeDeadlineSeconds": "activeDeadlineSeconds",
    "ttlSecondsAfterFinished": "ttlSecondsAfterFinished",
    "suspend": "suspend",
}
RUN_POLICY_NOT_CARRIED = {
    "managedBy": "no external controller hand-off here",
}
SCHEDULING_FIELDS = ("minAvailable", "priorityClass", "scheduleTimeoutSeconds", "queue")
SCHEDULING_NOT_CARRIED = {
    "minResources": "the PodGroup's minResources is not set by this operator (minMember only)",
}
POD_FIELDS = {
    "nodeSelector": "nodeSelector",
    "tolerations": "tolerations",
    "affinity": "affinity",
    "topologySpreadConstraints": "topologySpreadConstraints",
    "priorityClassName": "priorityClassName",
    "imagePullSecrets": "imagePullSecrets",
    "serviceAccountName": "serviceAccountName",
    "automountServiceAccountToken": "automountServiceAccountToken",
    "initContainers": "initContainers",
    "volumes": "volumes",
    "securityContext": "podSecurityContext",
}
POD_OWNED = {
    "restartPolicy": "the operator runs pods with restartPolicy Never and applies the replica's restartPolicy itself",
    "hostname": "the operator names the pods",
    "subdomain": "the operator's headless Service is the subdomain",
}
CONTAINER_FIELDS = {"env": "env", "volumeMounts": "volumeMounts", "securityContext": "securityContext"}
CONTAINER_OWNED = {"name": None, "image": None, "command": None, "args": None, "resources": None, "ports": None}
RESERVED_ENV = ("TF_CONFIG",)
LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
"""Becomes ``spec.model.keras`` (the wrapper sets it for the program and the exporter from that field)."""


class ConvertError(ValueError):
    """The TFJob cannot be converted; the message names the field and the reason."""


@dataclass(frozen=True)
class NotCarried:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Conversion:
    job: dict[str, Any]
    not_carried: list[NotCarried] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    keras: set[str] = field(default_factory=set)
    """``spec.model.keras`` values the replicas' ``TF_USE_LEGACY_KERAS`` asked for."""


def _replicas(spec: dict[str, Any], where: str) -> dict[str, tuple[str, dict[str, Any]]]:
    raw = spec.get("tfReplicaSpecs")
    if not isinstance(raw, dict) or not raw:
        raise ConvertError(f"{where}.tfReplicaSpecs: required: the replica types (PS, Worker, Chief...)")
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, rs in raw.items():
        role = ROLES.get(str(key).lower())
        if role is None:
            raise ConvertError(
                f"{where}.tfReplicaSpecs.{key}: not a TFJob replica type this project runs "
                f"(PS, Worker, Chief, Master, Evaluator)"
            )
        if role in out:
            raise ConvertError(f"{where}.tfReplicaSpecs.{key}: {out[role][0]} and {key} are both the chief; keep one")
        if not isinstance(rs, dict):
            raise ConvertError(f"{where}.tfReplicaSpecs.{key}: must be a replica spec")
        out[role] = (str(key), rs)
    if "chief" not in out:
        raise ConvertError(
            f"{where}.tfReplicaSpecs: no Chief (or Master): a ParameterServerStrategy job needs its "
            "coordinator; add a Chief replica with replicas: 1 running the program's chief branch"
        )
    for role in ("ps", "worker"):
        if role not in out:
            raise ConvertError(
                f"{where}.tfReplicaSpecs: no {'PS' if role == 'ps' else 'Worker'} replica: a "
                "parameter-server job needs at least one PS and one Worker"
            )
    return out


def _container(pod: dict[str, Any], where: str, dropped: list[NotCarried]) -> dict[str, Any]:
    containers = pod.get("containers") or []
    if not isinstance(containers, list) or not containers:
        raise ConvertError(f"{where}.containers: required: the {CONTAINER} container")
    named = [c for c in containers if isinstance(c, dict) and c.get("name") == CONTAINER]
    if not named and len(containers) == 1 and isinstance(containers[0], dict):
        named = [containers[0]]
    if not named:
        raise ConvertError(f"{where}.containers: no container named {CONTAINER!r} (TFJob's TensorFlow container)")
    main = named[0]
    for i, c in enumerate(containers):
        if c is not main:
            dropped.append(
                NotCarried(
                    f"{where}.containers[{i}] ({c.get('name') if isinstance(c, dict) else '?'})",
                    "sidecar containers are not supported: the pod runs only the trainer",
                )
            )
    return main


def _program(c: dict[str, Any], where: str, notes: list[str]) -> list[str]:
    command, args = c.get("command") or [], c.get("args") or []
    if not command and not args:
        raise ConvertError(
            f"{where}: neither command nor args: the program runs from the image's default command, "
            "which tfps convert cannot know; set command (e.g. [python, train.py])"
        )
    if not command:
        notes.append(f"{where}: no command; the program is args {args!r} (assumes the image has no ENTRYPOINT)")
    return [str(x) for x in [*command, *args]]


def _replica(
    role: str, key: str, rs: dict[str, Any], where: str, conv: Conversion
) -> tuple[dict[str, Any], list[str], str | None, int | None, str | None]:
    """The PSTrainingJob replica spec, its program, image, gRPC port and scheduler name."""
    dropped = conv.not_carried
    out: dict[str, Any] = {"replicas": int(rs.get("replicas", 1))}
    policy = rs.get("restartPolicy", TFJOB_DEFAULT_RESTART)
    if policy not in RESTART:
        raise ConvertError(
            f"{where}.restartPolicy: {policy!r} is not a TFJob restart policy (Always, OnFailure, Never, ExitCode)"
        )
    if policy == "Always":
        conv.notes.append(f"{where}.restartPolicy: Always became OnFailure (a replica that succeeded is not restarted)")
    out["restartPolicy"] = RESTART[policy]
    for k in rs:
        if k not in ("replicas", "restartPolicy", "template"):
            dropped.append(NotCarried(f"{where}.{k}", "not a field this project has"))
    template = rs.get("template") or {}
    meta, pod = template.get("metadata") or {}, template.get("spec") or {}
    for k in template:
        if k not in ("metadata", "spec"):
            dropped.append(NotCarried(f"{where}.template.{k}", "not part of a pod template"))
    pwhere = f"{where}.template.spec"
    c = _container(pod, pwhere, dropped)
    cwhere = f"{pwhere}.containers[{(pod.get('containers') or []).index(c)}]"
    program = _program(c, cwhere, conv.notes)
    tspec: dict[str, Any] = {}
    if c.get("resources"):
        res = {k: v for k, v in c["resources"].items() if k in ("limits", "requests")}
        for k in c["resources"]:
            if k not in ("limits", "requests"):
                dropped.append(NotCarried(f"{cwhere}.resources.{k}", "only limits and requests are carried over"))
        if res:
            out["resources"] = res
    for k, ours in CONTAINER_FIELDS.items():
        if c.get(k):
            tspec[ours] = copy.deepcopy(c[k])
    if "env" in tspec:
        for e in tspec["env"]:
            if e.get("name") == LEGACY_KERAS_ENV and "value" in e:
                conv.keras.add("legacy" if str(e["value"]).lower() in ("1", "true") else "keras3")
        tspec["env"] = [e for e in tspec["env"] if e.get("name") != LEGACY_KERAS_ENV or "value" not in e]
        kept = [
            e
            for e in tspec["env"]
            if e.get("name") not in RESERVED_ENV and not str(e.get("name", "")).startswith("TFPS_")
        ]
        for e in tspec["env"]:
            if e not in kept:
                dropped.append(NotCarried(f"{cwhere}.env[{e.get('name')}]", "set by the operator (reserved)"))
        tspec["env"] = kept
        if not kept:
            del tspec["env"]
    port = None
    for i, p in enumerate(c.get("ports") or []):
        if isinstance(p, dict) and p.get("name") == PORT_NAME and isinstance(p.get("containerPort"), int):
            port = p["containerPort"]
        else:
            dropped.append(
                NotCarried(
                    f"{cwhere}.ports[{i}]", f"the operator owns the ports (only {PORT_NAME} maps, to training.port)"
                )
            )
    for k in c:
        if k not in CONTAINER_FIELDS and k not in CONTAINER_OWNED:
            dropped.append(NotCarried(f"{cwhere}.{k}", "no such field for the trainer container"))
    for k, ours in POD_FIELDS.items():
        if k in pod and pod[k] not in (None, [], {}):
            tspec[ours] = copy.deepcopy(pod[k])
    scheduler = pod.get("schedulerName")
    for k in pod:
        if k in POD_OWNED:
            dropped.append(NotCarried(f"{pwhere}.{k}", POD_OWNED[k]))
        elif k not in POD_FIELDS and k not in ("containers", "schedulerName"):
            dropped.append(NotCarried(f"{pwhere}.{k}", "not a pod field this project carries"))
    tmeta = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    for k in meta:
        if k not in ("labels", "annotations"):
            dropped.append(NotCarried(f"{where}.template.metadata.{k}", "only labels and annotations are carried over"))
    if "labels" in tmeta:
        for label in [x for x in tmeta["labels"] if x.startswith("tfps.dev/")]:
            dropped.append(NotCarried(f"{where}.template.metadata.labels[{label}]", "reserved for the operator"))
            del tmeta["labels"][label]
    template_out = {k: v for k, v in (("metadata", tmeta), ("spec", tspec)) if v}
    if template_out:
        out["template"] = template_out
    return out, program, c.get("image"), port, scheduler


def convert(doc: dict[str, Any]) -> Conversion:
    """The PSTrainingJob (script mode) equivalent of a TFJob document. Raises :class:`ConvertError`."""
    if not isinstance(doc, dict) or doc.get("kind") != "TFJob":
        raise ConvertError(
            f"kind: expected TFJob, got {doc.get('kind') if isinstance(doc, dict) else type(doc).__name__!r}"
        )
    if doc.get("apiVersion") != TFJOB_API_VERSION:
        raise ConvertError(f"apiVersion: expected {TFJOB_API_VERSION}, got {doc.get('apiVersion')!r}")
    meta = doc.get("metadata") or {}
    if not meta.get("name"):
        raise ConvertError("metadata.name: required (generateName is not carried over: the job name names its pods)")
    conv = Conversion(job={})
    out_meta = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "labels", "annotations") if meta.get(k)}
    for k in meta:
        if k not in out_meta and k not in ("creationTimestamp",):
            conv.not_carried.append(NotCarried(f"metadata.{k}", "not carried over"))
    spec = doc.get("spec") or {}
    replicas = _replicas(spec, "spec")
    for k in spec:
        if k == "runPolicy" or k == "tfReplicaSpecs":
            continue
        reason = {
            "successPolicy": "the job succeeds when the chief does",
            "enableDynamicWorker": "workers are a fixed set",
        }
        conv.not_carried.append(NotCarried(f"spec.{k}", reason.get(k, "not a TFJob field this project carries")))
    built: dict[str, dict[str, Any]] = {}
    programs: dict[str, list[str]] = {}
    images: dict[str, str | None] = {}
    ports: set[int] = set()
    schedulers: set[str] = set()
    for role in ROLE_ORDER:
        if role not in replicas:
            continue
        key, rs = replicas[role]
        r, program, image, port, scheduler = _replica(role, key, rs, f"spec.tfReplicaSpecs.{key}", conv)
        built[role], programs[role], images[role] = r, program, image
        if port is not None:
            ports.add(port)
        if scheduler:
            schedulers.add(scheduler)
    if built["chief"]["replicas"] != 1:
        raise ConvertError(
            f"spec.tfReplicaSpecs.{replicas['chief'][0]}.replicas: must be 1 (one coordinator), got "
            f"{built['chief']['replicas']}"
        )
    job_spec: dict[str, Any] = {}
    distinct_images = {i for i in images.values() if i}
    if len(distinct_images) == 1 and all(images.values()):
        job_spec["image"] = distinct_images.pop()
    else:
        for role, image in images.items():
            if image:
                built[role]["image"] = image
    chief_program = programs["chief"]
    job_spec["model"] = {"command": chief_program}
    if len(conv.keras) > 1:
        raise ConvertError(
            f"spec.tfReplicaSpecs: the replicas set {LEGACY_KERAS_ENV} differently; one Keras runs the whole job"
        )
    if conv.keras:
        job_spec["model"]["keras"] = conv.keras.pop()
        conv.notes.append(f"env {LEGACY_KERAS_ENV} became spec.model.keras: {job_spec['model']['keras']}")
    else:
        conv.notes.append(
            "spec.model.keras: legacy by default (tf.keras is Keras 2 from tf_keras, as in TensorFlow <= 2.15); "
            "set keras3 for a program written for Keras 3"
        )
    for role, program in programs.items():
        if program != chief_program:
            built[role].setdefault("template", {}).setdefault("spec", {})["command"] = program
    job_spec["replicas"] = built
    if len(ports) > 1:
        conv.notes.append(f"replica types use different {PORT_NAME} ports {sorted(ports)}; all use {min(ports)}")
    if ports:
        job_spec["training"] = {"port": min(ports)}
    run_policy: dict[str, Any] = {"cleanPodPolicy": TFJOB_DEFAULT_CLEAN_POD_POLICY}
    for k, v in (spec.get("runPolicy") or {}).items():
        if k in RUN_POLICY_FIELDS:
            run_policy[RUN_POLICY_FIELDS[k]] = v
        elif k == "schedulingPolicy":
            carried = {f: v[f] for f in SCHEDULING_FIELDS if f in v}
            if carried:
                run_policy["schedulingPolicy"] = carried
            for f in v:
                if f not in SCHEDULING_FIELDS:
                    conv.not_carried.append(
                        NotCarried(
                            f"spec.runPolicy.schedulingPolicy.{f}",
                            SCHEDULING_NOT_CARRIED.get(f, "not a schedulingPolicy field here"),
                        )
                    )
        else:
            conv.not_carried.append(
                NotCarried(f"spec.runPolicy.{k}", RUN_POLICY_NOT_CARRIED.get(k, "not a runPolicy field here"))
            )
    if len(schedulers) == 1:
        run_policy["schedulerName"] = schedulers.pop()
    elif schedulers:
        raise ConvertError(
            f"schedulerName: the replica types name different schedulers {sorted(schedulers)}; one job has one"
        )
    job_spec["runPolicy"] = run_policy
    job_spec["export"] = {"enabled": False}
    conv.notes.append("export.enabled is false: enable it once the program saves its model to $(TFPS_MODEL_DIR)")
    conv.job = {"apiVersion": "tfps.dev/v1alpha1", "kind": "PSTrainingJob", "metadata": out_meta, "spec": job_spec}
    try:
        validate_job(copy.deepcopy(conv.job))
    except JobValidationError as exc:
        raise ConvertError("the converted job is not valid: " + "; ".join(str(e) for e in exc.errors)) from None
    return conv


def render(conv: Conversion) -> str:
    """The PSTrainingJob as YAML, with what was not carried over (and notes) in a comment on top."""
    head = ["# Converted from a Kubeflow TFJob by tfps convert."]
    if conv.not_carried:
        head.append("# NOT carried over:")
        head += [f"#   {d}" for d in conv.not_carried]
    if conv.notes:
        head.append("# Notes:")
        head += [f"#   {n}" for n in conv.notes]
    return "\n".join(head) + "\n" + yaml.safe_dump(conv.job, sort_keys=False)


def main(args: argparse.Namespace) -> int:
    """Exit codes: 0 converted (what was not carried over is on stderr), 1 ``--strict`` and something was
    not carried over, 2 cannot be converted."""
    try:
        docs = [d for d in yaml.safe_load_all(Path(args.file).read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        print(f"tfps convert: {args.file}: {exc}", file=sys.stderr)
        return 2
    if len(docs) != 1:
        print(f"tfps convert: {args.file}: expected one TFJob document, found {len(docs)}", file=sys.stderr)
        return 2
    try:
        conv = convert(docs[0])
    except ConvertError as exc:
        print(f"tfps convert: {args.file}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(conv))
    for d in conv.not_carried:
        print(f"tfps convert: not carried over: {d}", file=sys.stderr)
    for n in conv.notes:
        print(f"tfps convert: note: {n}", file=sys.stderr)
    return 1 if getattr(args, "strict", False) and conv.not_carried else 0
