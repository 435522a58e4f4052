"""`tfps convert tfjob.yaml`: a Kubeflow TFJob (``kubeflow.org/v1``) as a PSTrainingJob in script mode.

Pure: :func:`convert` maps the TFJob document to a PSTrainingJob document and lists every field it
could not carry over (:class:`NotCarried`); :func:`render` prints the YAML with those fields in a
comment at the top; :func:`main` also names them on stderr. The result is validated with the API's
own rules before it is printed, so what comes out is a job the API server accepts.

The strategy follows the TFJob's shape, as Kubeflow runs it: with PS replicas, ``strategy: ParameterServer``
(Chief/Master, PS, Worker, optional Evaluator); without (or with ``replicas: 0``), all-reduce:
``strategy: MultiWorkerMirrored`` (Worker, optional Chief/Master and Evaluator; ``replicas.ps`` left out,
``replicas.chief`` only when the TFJob has one). :attr:`Conversion.notes` says which and why.

What maps (TFJob field -> PSTrainingJob field):

- ``tfReplicaSpecs.{PS,Worker,Chief,Master,Evaluator}`` -> ``replicas.{ps,worker,chief,chief,evaluator}``:
  ``replicas`` (TFJob default 1), ``restartPolicy`` (TFJob default Never; Always becomes OnFailure, the
  nearest: a replica that succeeded is not restarted here), the ``tensorflow`` container's
  ``image`` (``spec.image`` when every replica type has the same), ``command`` + ``args`` (the program:
  ``spec.model.command`` is the chief's, or the workers' in a job without a chief; a replica type that
  runs another program gets it as ``template.spec.command``),
  ``env`` (``TF_USE_LEGACY_KERAS`` becomes ``model.keras``; without it the job runs Keras 2, as a
  TensorFlow <= 2.15 program expects), ``resources``, ``volumeMounts``, ``securityContext``, the
  ``tfjob-port`` port (``training.port``); the pod's ``nodeSelector``, ``tolerations``, ``affinity``,
  ``topologySpreadConstraints``, ``priorityClassName``, ``imagePullSecrets``, ``serviceAccountName``,
  ``automountServiceAccountToken``, ``initContainers``, ``volumes``, ``securityContext``, and the
  template's labels and annotations; ``schedulerName`` -> ``runPolicy.schedulerName``.
- ``successPolicy``: ``""``/absent (TFJob's default: the chief, or worker 0 without one) -> the default
  ``runPolicy.successPolicy`` ChiefOrWorker0; ``AllWorkers`` -> ``runPolicy.successPolicy: AllWorkers`` in a
  job without PS or Chief/Master (Kubeflow ignores it when there is a Chief/Master, and it cannot apply to a
  ParameterServer job, whose workers never exit: then it is named, not carried).
- ``runPolicy``: ``cleanPodPolicy`` (TFJob default Running), ``backoffLimit``, ``activeDeadlineSeconds``,
  ``ttlSecondsAfterFinished``, ``suspend``; ``schedulingPolicy``'s ``minAvailable``, ``priorityClass`` and
  ``scheduleTimeoutSeconds`` (gang scheduling, when the operator has it enabled) and ``queue`` (Kueue,
  when the operator integrates with it).

Not carried over (named): ``schedulingPolicy.minResources``, ``runPolicy.managedBy``, ``successPolicy:
AllWorkers`` where it cannot map (above), ``enableDynamicWorker``, a PS with ``replicas: 0``, containers other
than ``tensorflow`` (sidecars), and every other pod or container field (``workingDir``, probes, ``ports``
other than tfjob-port, ``hostNetwork``...). Refused (no job printed): not a TFJob, a replica type this project
does not have, no Worker, PS without a Chief/Master (a ParameterServerStrategy job needs its coordinator),
a Chief/Master whose replicas is not 1 (with PS) or above 1 (without), a ``tensorflow`` container with
neither ``command`` nor ``args`` (the image's ENTRYPOINT runs the program: tfps wraps the program, so the
manifest must name its argv).

The program's own directories (``spec.model.directories``: checkpoints, saved model, TensorBoard logs) are
read from its flags (:data:`DIRECTORY_FLAGS`: ``--checkpoint_dir``, ``--saved_model_dir``, ``--log_dir``,
``--model_dir``...) when their values are on a volume the lead mounts; a note names each one set, and each
flag left out and why.
The export is left disabled (``export.enabled: false``): enable it once the program saves its model where
tfps reads it (``spec.model.directories.savedModel``, or ``$(TFPS_MODEL_DIR)``).
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tfps_wire.safepaths import at_or_under

from ..api import reserved
from ..api.models import API_VERSION, Strategy
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
RESERVED_ENV = reserved.ENV
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


def _count(rs: dict[str, Any], where: str) -> int:
    """The ``replicas`` of a TFJob replica spec (TFJob's default: 1)."""
    n = rs.get("replicas")
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConvertError(f"{where}.replicas: must be a non-negative integer, got {n!r}")
    return n


def _replicas(spec: dict[str, Any], where: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The replica specs by our role (``Master`` is the chief): role -> (TFJob key, replica spec)."""
    raw = spec.get("tfReplicaSpecs")
    if not isinstance(raw, dict) or not raw:
        raise ConvertError(f"{where}.tfReplicaSpecs: required: the replica types (Worker, PS, Chief...)")
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
    return out


def _strategy(replicas: dict[str, tuple[str, dict[str, Any]]], where: str, conv: Conversion) -> Strategy:
    """The strategy of the TFJob's shape, as Kubeflow runs it: with parameter servers, ParameterServer
    (which needs a Chief and Workers); without, all-reduce: MultiWorkerMirrored (Workers, an optional Chief).
    A PS with ``replicas: 0`` is no PS (Kubeflow's TF_CONFIG then has none): it is dropped from ``replicas``."""
    ps = replicas.get("ps")
    if ps is not None and _count(ps[1], f"{where}.tfReplicaSpecs.{ps[0]}") == 0:
        conv.not_carried.append(
            NotCarried(f"{where}.tfReplicaSpecs.{ps[0]}", "replicas 0: no parameter servers, so no PS replica type")
        )
        del replicas["ps"]
        ps = None
    if "worker" not in replicas:
        if ps is not None:
            raise ConvertError(
                f"{where}.tfReplicaSpecs: no Worker replica: a parameter-server job needs at least one PS and one "
                "Worker"
            )
        raise ConvertError(
            f"{where}.tfReplicaSpecs: no Worker replica: a job here trains on Workers (at least one); a TFJob "
            "without PS runs as MultiWorkerMirrored, whose Workers are tfReplicaSpecs.Worker (a single-process "
            "Chief-only job becomes a Worker with replicas: 1)"
        )
    if ps is None:
        conv.notes.append(
            "strategy: MultiWorkerMirrored, as the TFJob has no PS (Kubeflow runs it as all-reduce: "
            "MultiWorkerMirroredStrategy or another collective strategy); a chief or worker failure restarts "
            "every chief and worker pod from the latest checkpoint"
        )
        return "MultiWorkerMirrored"
    if "chief" not in replicas:
        raise ConvertError(
            f"{where}.tfReplicaSpecs.Chief: required with PS: no Chief (or Master): a ParameterServerStrategy job "
            "needs its coordinator; add a Chief replica with replicas: 1 running the program's chief branch"
        )
    conv.notes.append("strategy: ParameterServer, as the TFJob has PS replicas (ParameterServerStrategy)")
    return "ParameterServer"


def _check_chief(key: str, count: int, strategy: Strategy, where: str) -> None:
    """A ParameterServer job has exactly one chief; a MultiWorkerMirrored job at most one."""
    if strategy == "ParameterServer" and count != 1:
        raise ConvertError(f"{where}.tfReplicaSpecs.{key}.replicas: must be 1 (one coordinator), got {count}")
    if count > 1:
        raise ConvertError(
            f"{where}.tfReplicaSpecs.{key}.replicas: must be 0 or 1 (a job has at most one chief), got {count}"
        )


def _success_policy(spec: dict[str, Any], strategy: Strategy, chief: str | None, conv: Conversion) -> str | None:
    """``runPolicy.successPolicy`` for the TFJob's ``successPolicy`` (None: the default, ChiefOrWorker0).

    Kubeflow reads it only when the TFJob has no Chief/Master: then ``""`` (its default) succeeds when
    worker 0 does (ChiefOrWorker0 here) and ``AllWorkers`` when every worker has. With a Chief/Master the
    chief's exit decides whatever it says, as ChiefOrWorker0 does here: ``AllWorkers`` is then named, not
    carried."""
    policy = spec.get("successPolicy") or ""
    if policy not in ("", "AllWorkers"):
        raise ConvertError(f"spec.successPolicy: {policy!r} is not a TFJob success policy ('' or AllWorkers)")
    if not policy:
        return None
    if strategy == "ParameterServer":
        conv.not_carried.append(
            NotCarried(
                "spec.successPolicy",
                "AllWorkers cannot apply to a ParameterServer job (its workers never exit): it succeeds when "
                "the chief does, as the TFJob with its Chief did",
            )
        )
        return None
    if chief is not None:
        conv.not_carried.append(
            NotCarried(
                "spec.successPolicy",
                f"Kubeflow ignores AllWorkers in a TFJob with a {chief}: the chief's exit decides, as the default "
                "ChiefOrWorker0 does here; set runPolicy.successPolicy: AllWorkers to wait for every worker too",
            )
        )
        return None
    return "AllWorkers"


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
    """The program's argv: ``command`` + ``args``. tfps runs it under its wrapper (which follows the
    checkpoints and classifies failures), so the argv must be in the manifest, not only in the image."""
    command, args = c.get("command") or [], c.get("args") or []
    if not command and not args:
        raise ConvertError(
            f"{where}.command: required: the {CONTAINER} container has neither command nor args, so the image's "
            "ENTRYPOINT/CMD runs the program, and tfps convert cannot read an image. Add the program as command: "
            f"in the {CONTAINER} container, e.g. the image's ENTRYPOINT and CMD such as "
            '["python", "/opt/train.py"] '
            "(docker inspect IMAGE shows them under Config): tfps runs the program inside its wrapper, which "
            "follows checkpoints and classifies failures, so it must know the program's argv"
        )
    if not command:
        notes.append(
            f"{where}: no command; the program is args {args!r} (assumes the image has no ENTRYPOINT: if it "
            "has one, put it in front, as command)"
        )
    return [str(x) for x in [*command, *args]]


def _replica(
    role: str, key: str, rs: dict[str, Any], where: str, conv: Conversion
) -> tuple[dict[str, Any], list[str], str | None, int | None, str | None]:
    """The PSTrainingJob replica spec, its program, image, gRPC port and scheduler name."""
    dropped = conv.not_carried
    out: dict[str, Any] = {"replicas": _count(rs, where)}
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
            if e.get("name") not in RESERVED_ENV and not str(e.get("name", "")).startswith(reserved.ENV_PREFIX)
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
    for kind in ("labels", "annotations"):
        set_by_us = (reserved.POD_GROUP_LABEL, reserved.KUEUE_QUEUE_LABEL) if kind == "labels" else ()
        for key in [x for x in tmeta.get(kind, {}) if x.startswith(reserved.LABEL_PREFIX) or x in set_by_us]:
            dropped.append(NotCarried(f"{where}.template.metadata.{kind}[{key}]", "reserved for the operator"))
            del tmeta[kind][key]
        if kind in tmeta and not tmeta[kind]:
            del tmeta[kind]
    template_out = {k: v for k, v in (("metadata", tmeta), ("spec", tspec)) if v}
    if template_out:
        out["template"] = template_out
    return out, program, c.get("image"), port, scheduler


DIRECTORY_FLAGS: dict[str, tuple[str, ...]] = {
    "checkpoints": ("checkpoint_dir", "checkpoint-dir", "ckpt_dir", "ckpt-dir", "checkpoint_path", "model_dir"),
    "savedModel": ("saved_model_dir", "saved-model-dir", "export_dir", "export-dir", "saved_model_path"),
    "tensorboard": ("log_dir", "log-dir", "logdir", "tensorboard_dir", "summary_dir", "model_dir"),
}
"""``spec.model.directories`` field -> the flags whose value names it, in order of preference (``--model_dir``
is an Estimator's: its checkpoints and event files)."""


def flag_values(argv: list[str]) -> dict[str, str]:
    """``--name=value`` and ``--name value`` pairs of a command line (the last one of a name wins)."""
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if not arg.startswith("--") or len(arg) < 3:
            continue
        name, eq, value = arg[2:].partition("=")
        if eq:
            out[name] = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out[name] = argv[i + 1]
    return out


def program_directories(argv: list[str], mount_paths: list[str]) -> tuple[dict[str, str], list[str]]:
    """``spec.model.directories`` read from the program's flags: each that names a directory at or under one of
    ``mount_paths`` (the lead's volumeMounts), and a note for each field set and each flag left out."""
    flags, found, notes = flag_values(argv), {}, []
    for key, names in DIRECTORY_FLAGS.items():
        for name in names:
            value = flags.get(name)
            if value is None:
                continue
            path = value.rstrip("/") or "/"
            on = [m for m in mount_paths if at_or_under(path, m.rstrip("/"))]
            if not path.startswith("/") or "$(" in path or "/." in path:
                notes.append(f"--{name} {value}: not an absolute path tfps can read; set spec.model.directories.{key}")
            elif not on:
                notes.append(
                    f"--{name} {value}: on no volume the lead mounts, so tfps does not follow it; mount a volume "
                    f"there, then set spec.model.directories.{key}"
                )
            else:
                found[key] = path
                notes.append(f"spec.model.directories.{key}: {path} (from --{name}): tfps follows it there")
            break
    if not found and not notes:
        notes.append(
            "spec.model.directories: not set (no --checkpoint_dir, --saved_model_dir, --log_dir or --model_dir "
            "flag): set it when the program writes its checkpoints, saved model or TensorBoard logs to "
            "directories of its own on a mounted volume"
        )
    return found, notes


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
    strategy = _strategy(replicas, "spec", conv)
    for k in spec:
        if k in ("runPolicy", "tfReplicaSpecs", "successPolicy"):
            continue
        reason = {"enableDynamicWorker": "workers are a fixed set"}
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
    chief_key = replicas["chief"][0] if "chief" in replicas else None
    if chief_key is not None:
        _check_chief(chief_key, built["chief"]["replicas"], strategy, "spec")
    job_spec: dict[str, Any] = {"strategy": strategy}
    distinct_images = {i for i in images.values() if i}
    if len(distinct_images) == 1 and all(images.values()):
        job_spec["image"] = distinct_images.pop()
    else:
        for role, image in images.items():
            if image:
                built[role]["image"] = image
    # The job's program is its lead's: the chief's, or the workers' in a job without one; a replica type
    # that runs another program gets it in its template.
    lead_program = programs["chief" if "chief" in programs else "worker"]
    job_spec["model"] = {"command": lead_program}
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
        if program != lead_program:
            built[role].setdefault("template", {}).setdefault("spec", {})["command"] = program
    job_spec["replicas"] = built
    if len(ports) > 1:
        conv.notes.append(f"replica types use different {PORT_NAME} ports {sorted(ports)}; all use {min(ports)}")
    if ports:
        job_spec["training"] = {"port": min(ports)}
    run_policy: dict[str, Any] = {"cleanPodPolicy": TFJOB_DEFAULT_CLEAN_POD_POLICY}
    success_policy = _success_policy(spec, strategy, chief_key, conv)
    if success_policy:
        run_policy["successPolicy"] = success_policy
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
    lead = "chief" if "chief" in built else "worker"
    mounts = built[lead].get("template", {}).get("spec", {}).get("volumeMounts") or []
    directories, dir_notes = program_directories(lead_program, [m["mountPath"] for m in mounts if "mountPath" in m])
    conv.notes.extend(dir_notes)
    if directories:
        job_spec["model"]["directories"] = directories
    job_spec["export"] = {"enabled": False}
    saved = directories.get("savedModel")
    conv.notes.append(
        f"export.enabled is false: enable it to export and verify the model the program saves to {saved}"
        if saved
        else "export.enabled is false: enable it once the program saves its model to $(TFPS_MODEL_DIR), or set "
        "spec.model.directories.savedModel to where it saves it"
    )
    conv.job = {"apiVersion": API_VERSION, "kind": "PSTrainingJob", "metadata": out_meta, "spec": job_spec}
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
