"""Trainer pods: one per (role, index), hardened, with TF_CONFIG and the job settings in the env.

Everything here is a pure function of the validated job and :class:`~tfps_operator.settings.BuildConfig`.
The pod spec builder is shared with the export Job, so both run with the same hardening and storage.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from tfps_wire.job_settings import SETTINGS_ENV

from ..api import reserved
from ..api.models import PodSpecOverride, PodTemplateOverride, PSTrainingJob, ResourceRequirements, Role, replica_counts
from ..settings import BuildConfig
from ..strategies import lead_of
from ..strategies import of as strategy_of
from . import labels, names
from .jobsettings import CODE_DIR, job_settings
from .podgroup import POD_GROUP_LABEL, gang_enabled, pod_group_name
from .tfconfig import tf_config_json

CONTAINER = reserved.CONTAINER
STORAGE_VOLUME = reserved.STORAGE_VOLUME
TMP_VOLUME = reserved.TMP_VOLUME
TRAINER_COMMAND = ["python", "-m", "tfps_trainer"]
RESERVED_ENV_PREFIX = reserved.ENV_PREFIX
RESERVED_ENV = reserved.ENV


class BuildError(ValueError):
    """The job cannot be turned into valid children; the message names the field."""


CODE_VOLUME = reserved.CODE_VOLUME
CODE_FILE_MODE = 0o444
CREDENTIALS_VOLUME = reserved.CREDENTIALS_VOLUME
CREDENTIALS_DIR = reserved.CREDENTIALS_DIR
CREDENTIALS_ENV = reserved.CREDENTIALS_ENV


def image(job: PSTrainingJob, cfg: BuildConfig, role: Role) -> str:
    """The replica type's image, else the job's, else the operator's default (the export Job: the lead's)."""
    return job.spec.replicas.of(role).image or job.spec.image or cfg.default_image


def code_volume(job: PSTrainingJob) -> dict[str, Any] | None:
    """``spec.model.source`` as a read-only configMap volume, or None."""
    src = job.spec.model.source
    if src is None:
        return None
    cm: dict[str, Any] = {"name": src.config_map, "defaultMode": CODE_FILE_MODE}
    if src.items:
        cm["items"] = [{"key": i.key, "path": i.path} for i in src.items]
    return {"name": CODE_VOLUME, "configMap": cm}


def storage_volume(job: PSTrainingJob) -> dict[str, Any] | None:
    """The job's storage as a pod volume: an existing claim, the PVC the operator creates, or an
    emptyDir (then checkpoints do not outlive the pod, and the export cannot see them); None with
    ``spec.storage.uri`` (object storage: no volume)."""
    s = job.spec.storage
    if s.uri:
        return None
    if s.claim_name:
        return {"name": STORAGE_VOLUME, "persistentVolumeClaim": {"claimName": s.claim_name}}
    if s.volume_claim_template:
        return {"name": STORAGE_VOLUME, "persistentVolumeClaim": {"claimName": names.pvc_name(job.metadata.name)}}
    return {"name": STORAGE_VOLUME, "emptyDir": {}}


def pod_security_context(cfg: BuildConfig) -> dict[str, Any]:
    """Admitted under PodSecurity ``restricted``."""
    return {
        "runAsNonRoot": True,
        "runAsUser": cfg.run_as_user,
        "runAsGroup": cfg.run_as_user,
        "fsGroup": cfg.run_as_user,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _resources(r: ResourceRequirements | None) -> dict[str, Any] | None:
    return r.to_wire() if r else None


def settings_env(job: PSTrainingJob, cfg: BuildConfig) -> str:
    """``TFPS_JOB``: the trainer's settings, with the operator's progress port."""
    return job_settings(job).model_copy(update={"progress_port": cfg.progress_port}).to_env()


def _check_user_env(env: Sequence[Mapping[str, object]], where: str) -> None:
    for i, var in enumerate(env):
        name = str(var.get("name", ""))
        if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIX):
            raise BuildError(f"{where}.env[{i}].name: {name!r} is reserved for the operator")


def pod_spec(
    job: PSTrainingJob,
    cfg: BuildConfig,
    *,
    command: list[str],
    env: list[dict[str, Any]],
    ports: list[dict[str, Any]],
    resources: ResourceRequirements | None,
    override: PodTemplateOverride | None,
    where: str,
    role: Role,
) -> dict[str, Any]:
    """A hardened pod spec running ``command`` with the job's storage mounted at ``spec.storage.mountPath``.

    ``override`` (a replica type's ``template``) is merged in: its security contexts win key by key,
    its env, volumes and mounts are appended, scheduling fields are set. ``where`` names the
    template in error messages, e.g. ``spec.replicas.worker.template.spec``.
    """
    o = override.spec if override and override.spec else None
    container = _trainer_container(job, cfg, role, command, env, ports, o.resources if o and o.resources else resources)
    spec = _hardened_pod(job, cfg, container)
    if role in strategy_of(job).storage_roles:  # the others never touch storage: no credentials
        mount_credentials(job, spec["volumes"], container)
    code = code_volume(job)
    if code is not None:
        _mount_code(spec, container, code)
    if o is not None:
        _merge_template(spec, container, o, where)
    return spec


def _trainer_container(
    job: PSTrainingJob,
    cfg: BuildConfig,
    role: Role,
    command: list[str],
    env: list[dict[str, Any]],
    ports: list[dict[str, Any]],
    resources: ResourceRequirements | None,
) -> dict[str, Any]:
    """The one container: ``command`` under the restricted security context, the storage and /tmp mounted."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image(job, cfg, role),
        "command": list(command),
        "env": [{"name": "HOME", "value": reserved.TMP_DIR}, {"name": "PYTHONUNBUFFERED", "value": "1"}, *env],
        "volumeMounts": [
            *([] if job.spec.storage.uri else [{"name": STORAGE_VOLUME, "mountPath": job.spec.storage.mount_path}]),
            {"name": TMP_VOLUME, "mountPath": reserved.TMP_DIR},
        ],
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if ports:
        container["ports"] = ports
    res = _resources(resources)
    if res:
        container["resources"] = res
    return container


def _hardened_pod(job: PSTrainingJob, cfg: BuildConfig, container: dict[str, Any]) -> dict[str, Any]:
    """The pod around ``container``: never restarted in place, no API token, no service links, the job's
    scheduler and priority class."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": job.spec.run_policy.termination_grace_period_seconds,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(cfg),
        "containers": [container],
        "volumes": [v for v in (storage_volume(job), {"name": TMP_VOLUME, "emptyDir": {}}) if v is not None],
    }
    if job.spec.run_policy.scheduler_name:
        spec["schedulerName"] = job.spec.run_policy.scheduler_name
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        spec["priorityClassName"] = policy.priority_class
    return spec


def mount_credentials(job: PSTrainingJob, volumes: list[dict[str, Any]], container: dict[str, Any]) -> None:
    """``spec.storage.credentialsSecret``: its one key read-only under :data:`CREDENTIALS_DIR`, named by
    ``GOOGLE_APPLICATION_CREDENTIALS`` (nothing without it: the pod's service account is used)."""
    ref = job.spec.storage.credentials_secret
    if ref is None:
        return
    volumes.append(
        {
            "name": CREDENTIALS_VOLUME,
            "secret": {"secretName": ref.name, "items": [{"key": ref.key, "path": ref.key}], "defaultMode": 0o440},
        }
    )
    container["volumeMounts"].append({"name": CREDENTIALS_VOLUME, "mountPath": CREDENTIALS_DIR, "readOnly": True})
    container["env"].append({"name": CREDENTIALS_ENV, "value": f"{CREDENTIALS_DIR}/{ref.key}"})


def _mount_code(spec: dict[str, Any], container: dict[str, Any], code: dict[str, Any]) -> None:
    """``spec.model.source`` read-only at :data:`CODE_DIR`, the working directory and first on PYTHONPATH."""
    spec["volumes"].append(code)
    container["volumeMounts"].append({"name": CODE_VOLUME, "mountPath": CODE_DIR, "readOnly": True})
    container["workingDir"] = CODE_DIR
    container["env"].append({"name": "PYTHONPATH", "value": CODE_DIR})


def _merge_template(spec: dict[str, Any], container: dict[str, Any], o: PodSpecOverride, where: str) -> None:
    """The template's pod settings over the operator's: what it adds must not take a name, a mount path or an
    environment variable the operator uses (a :class:`BuildError` naming the field)."""
    if o.service_account_name:
        spec["serviceAccountName"] = o.service_account_name
    spec["automountServiceAccountToken"] = o.automount_service_account_token
    if o.init_containers:
        spec["initContainers"] = _init_containers(o.init_containers, where)
    if o.env:
        _check_user_env(o.env, where)
        container["env"] += copy.deepcopy(o.env)
    taken = {v["name"] for v in spec["volumes"]}
    for i, vol in enumerate(o.volumes or []):
        if _text(vol, "name", f"{where}.volumes[{i}]") in taken:
            raise BuildError(f"{where}.volumes[{i}].name: {vol.get('name')!r} is reserved for the operator")
        spec["volumes"].append(copy.deepcopy(vol))
    mounted = {m["mountPath"] for m in container["volumeMounts"]}
    for i, mount in enumerate(o.volume_mounts or []):
        if _text(mount, "mountPath", f"{where}.volumeMounts[{i}]") in mounted:
            raise BuildError(
                f"{where}.volumeMounts[{i}].mountPath: {mount.get('mountPath')!r} is already used by the operator"
            )
        container["volumeMounts"].append(copy.deepcopy(mount))
    if o.security_context:
        container["securityContext"] = {**container["securityContext"], **copy.deepcopy(o.security_context)}
    if o.pod_security_context:
        spec["securityContext"] = {**spec["securityContext"], **copy.deepcopy(o.pod_security_context)}
    for key, value in (
        ("nodeSelector", o.node_selector),
        ("tolerations", o.tolerations),
        ("affinity", o.affinity),
        ("priorityClassName", o.priority_class_name),
        ("imagePullSecrets", o.image_pull_secrets),
        ("topologySpreadConstraints", o.topology_spread_constraints),
    ):
        if value:
            spec[key] = copy.deepcopy(value)


def _init_containers(inits: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """The template's init containers, each named uniquely in the pod, under the same restricted defaults as
    the trainer container (its own securityContext wins key by key, as the template's does for the trainer)."""
    names_seen = {CONTAINER}
    for i, init in enumerate(inits):
        n = _text(init, "name", f"{where}.initContainers[{i}]")
        if n in names_seen:
            raise BuildError(f"{where}.initContainers[{i}].name: {n!r} is already used in the pod")
        names_seen.add(n)
    return [
        {
            **copy.deepcopy(init),
            "securityContext": {**container_security_context(), **copy.deepcopy(init.get("securityContext") or {})},
        }
        for init in inits
    ]


def merged_meta(override: PodTemplateOverride | None, ours: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Template labels and annotations, with the operator's labels winning on a clash."""
    m = override.metadata if override and override.metadata else None
    return {**((m.labels if m else None) or {}), **ours}, dict((m.annotations if m else None) or {})


def trainer_pod(job: PSTrainingJob, role: Role, index: int, cfg: BuildConfig, restart: int = 0) -> dict[str, Any]:
    """Pod ``<job>-<role>-<index>``, reachable as ``<pod>.<job>.<ns>.svc`` through the headless Service.

    ``restart`` is the job's ``status.restarts`` (recorded on the pod as ``tfps.dev/restart``).
    """
    name, ns = job.metadata.name, job.metadata.namespace
    counts = replica_counts(job)
    port = job.spec.training.port
    replica = job.spec.replicas.of(role)
    tf_config = tf_config_json(counts, lambda r, i: f"{names.pod_fqdn(name, ns, r, i)}:{port}", role, index)
    ports = [{"name": "grpc", "containerPort": port, "protocol": "TCP"}]
    if (role, index) == lead_of(job) or role == "evaluator":  # they serve tfps_trainer.status_server
        ports.append({"name": "progress", "containerPort": cfg.progress_port, "protocol": "TCP"})
    spec = pod_spec(
        job,
        cfg,
        command=TRAINER_COMMAND,
        env=[{"name": "TF_CONFIG", "value": tf_config}, {"name": SETTINGS_ENV, "value": settings_env(job, cfg)}],
        ports=ports,
        resources=replica.resources,
        override=replica.template,
        where=f"spec.replicas.{role}.template.spec",
        role=role,
    )
    pod = names.pod_name(name, role, index)
    spec["hostname"] = pod
    spec["subdomain"] = names.service_name(name)
    ours = labels.pod_labels(name, role, index, restart)
    if gang_enabled(cfg):
        ours[POD_GROUP_LABEL] = pod_group_name(job)
        spec["schedulerName"] = job.spec.run_policy.scheduler_name or cfg.gang_scheduler_name
    pod_labels, annotations = merged_meta(replica.template, ours)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": labels.child_metadata(job, pod, pod_labels, annotations),
        "spec": spec,
    }


def desired_pods(job: PSTrainingJob, cfg: BuildConfig, restart: int = 0) -> dict[str, dict[str, Any]]:
    """Every trainer pod of the job, by name, in role order (chief, ps, worker, evaluator)."""
    if len(job.metadata.name) > names.MAX_JOB_NAME:
        raise BuildError(
            f"metadata.name: {len(job.metadata.name)} characters is too long; pod names "
            f"<job>-<role>-<index> must be DNS labels, so the job name may have at most {names.MAX_JOB_NAME}"
        )
    pods: dict[str, dict[str, Any]] = {}
    for role, count in replica_counts(job).items():
        for i in range(count):
            pod = trainer_pod(job, role, i, cfg, restart)
            pods[pod["metadata"]["name"]] = pod
    return pods


def _text(item: Mapping[str, object], key: str, where: str) -> str:
    """``item[key]`` as a non-empty string; anything else (an object that slipped past an older CRD) is a
    BuildError naming the field, not a crash."""
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise BuildError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value
