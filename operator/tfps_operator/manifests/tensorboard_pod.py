"""The short-lived pod through which ``tfps tensorboard`` shows one or several jobs' TensorBoard logs: it
mounts each job's claim read-only (and the lead's volume that holds a program's own log directory,
``spec.model.directories.tensorboard``), or gets the chief's object-storage settings), runs TensorBoard on the
pod's loopback (reached by port-forward, which connects inside the pod's network namespace), and ends by
its own deadline if the client that made it dies."""

from __future__ import annotations

import copy
from typing import Any

from tfps_wire.safepaths import at_or_under

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from ..strategies import lead_of
from .artifact_reader import reader_pod
from .jobsettings import job_root
from .pods import STORAGE_VOLUME, TMP_VOLUME

TENSORBOARD_LABEL = "tfps.dev/tensorboard"
"""On TensorBoard pods: the first job they show. Not ``tfps.dev/job-name``: the operator never counts them."""
PORT = 6006
MOUNT_ROOT = "/tfps/claims"
PROGRAM_ROOT = "/tfps/program"
"""Where a job's program-owned log directory's volume is mounted: ``/tfps/program/<job>``."""


def logdir_spec(job_dirs: dict[str, str]) -> str:
    """TensorBoard's ``--logdir_spec``: ``name:dir`` pairs, one run group per job. A name may not hold
    ``:`` or ``,`` (TensorBoard splits on them); job names are DNS labels, so none does."""
    for name in job_dirs:
        if not name or ":" in name or "," in name:
            raise ValueError(f"job name {name!r}: TensorBoard's --logdir_spec cannot hold ':' or ','")
    return ",".join(f"{name}:{d}" for name, d in job_dirs.items())


def tensorboard_command(job_dirs: dict[str, str], port: int = PORT) -> list[str]:
    """TensorBoard on loopback only, over each job's ``tensorboard/`` directory."""
    return [
        "python",
        "-m",
        "tensorboard.main",
        f"--logdir_spec={logdir_spec(job_dirs)}",
        "--host=127.0.0.1",
        f"--port={port}",
    ]


def program_logdir(job: PSTrainingJob) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """A script-mode job whose program writes its TensorBoard logs to a directory of its own
    (``spec.model.directories.tensorboard``): (the lead template's volume that holds it, that volume's mount,
    the directory's path under the mount); None for a job whose logs are in its own directory."""
    dirs = job.spec.model.directories
    if dirs is None or dirs.tensorboard is None:
        return None
    lead, _ = lead_of(job)
    template = job.spec.replicas.of(lead).template
    spec = template.spec if template is not None else None
    mounts = [m for m in (spec.volume_mounts if spec else None) or [] if at_or_under(dirs.tensorboard, m["mountPath"])]
    if not mounts:  # the API server's rule (spec.model.directories) refuses such a job
        raise ValueError(f"job {job.metadata.name}: spec.model.directories.tensorboard is on no volume of the lead")
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    volume = next(v for v in (spec.volumes if spec else None) or [] if v.get("name") == mount["name"])
    return volume, dict(mount), dirs.tensorboard[len(mount["mountPath"].rstrip("/")) :].lstrip("/")


def _claim(job: PSTrainingJob) -> str:
    volume = reader_pod(job, "x", "x", 60)["spec"]["volumes"][0]  # the job's claim, as the reader mounts it
    return str(volume["persistentVolumeClaim"]["claimName"])


def tensorboard_pod(
    jobs: list[PSTrainingJob], name: str, image: str, lifetime_seconds: int, cfg: BuildConfig | None = None
) -> dict[str, Any]:
    """A pod running TensorBoard over ``jobs`` (one namespace) for at most ``lifetime_seconds``
    (``activeDeadlineSeconds``). Built on :func:`~.artifact_reader.reader_pod` of the first job, so it is
    scheduled like its chief and gets its object-storage access; every job owns it (not as controller), so
    it goes when they are all deleted. On volumes, each distinct claim is mounted read-only once, at
    ``/tfps/claims/<claim>``. Jobs on volumes and in object storage cannot be mixed, nor object-storage jobs
    read with different credentials (the pod has one set)."""
    if not jobs:
        raise ValueError("no job to show")
    first = jobs[0]
    ns = first.metadata.namespace
    if any(j.metadata.namespace != ns for j in jobs):
        raise ValueError("jobs: all in one namespace (one pod mounts their claims)")
    on_uri = {bool(j.spec.storage.uri) for j in jobs}
    if len(on_uri) > 1:
        raise ValueError("jobs: some on volumes, some in object storage; show them with two commands")
    pod = reader_pod(first, name, image, lifetime_seconds, cfg)
    spec = pod["spec"]
    (container,) = spec["containers"]
    container["name"] = "tensorboard"
    container["resources"] = {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
    dirs: dict[str, str] = {}
    if first.spec.storage.uri:
        secrets = {c.model_dump_json() if (c := j.spec.storage.credentials_secret) else None for j in jobs}
        if len(secrets) > 1:
            raise ValueError("jobs: object storage read with different spec.storage.credentialsSecret")
        dirs = {j.metadata.name: f"{job_root('', j)}/tensorboard" for j in jobs}
    else:
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] != STORAGE_VOLUME]
        container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != STORAGE_VOLUME]
        claims: dict[str, str] = {}
        for j in jobs:
            claim = _claim(j)
            if claim not in claims:
                volume = f"claim-{len(claims)}"
                claims[claim] = volume
                spec["volumes"].append(
                    {"name": volume, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
                )
                container["volumeMounts"].append(
                    {"name": volume, "mountPath": f"{MOUNT_ROOT}/{claim}", "readOnly": True}
                )
            dirs[j.metadata.name] = f"{job_root(f'{MOUNT_ROOT}/{claim}', j)}/tensorboard"
        for j in jobs:  # a program's own log directory: the volume of the lead that holds it, read-only
            found = program_logdir(j)
            if found is None:
                continue
            source, mount, rest = found
            name = f"program-{len(spec['volumes'])}"
            program_volume = {**copy.deepcopy(source), "name": name}
            if "persistentVolumeClaim" in program_volume:
                program_volume["persistentVolumeClaim"]["readOnly"] = True
            at = f"{PROGRAM_ROOT}/{j.metadata.name}"
            spec["volumes"].append(program_volume)
            container["volumeMounts"].append(
                {"name": name, "mountPath": at, "readOnly": True}
                | ({"subPath": mount["subPath"]} if mount.get("subPath") else {})
            )
            dirs[j.metadata.name] = f"{at}/{rest}" if rest else at
    if not any(v["name"] == TMP_VOLUME for v in spec["volumes"]):  # TensorBoard writes its info file there
        spec["volumes"].append({"name": TMP_VOLUME, "emptyDir": {}})
        container["volumeMounts"].append({"name": TMP_VOLUME, "mountPath": "/tmp"})
        container["env"] = [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}]
    container["command"] = tensorboard_command(dirs)
    container["ports"] = [{"name": "tensorboard", "containerPort": PORT}]
    container["readinessProbe"] = {
        "exec": {"command": ["python", "-c", _READY]},
        "periodSeconds": 2,
        "failureThreshold": 600,
    }
    owner = pod["metadata"]["ownerReferences"][0]
    pod["metadata"]["ownerReferences"] = [{**owner, "name": j.metadata.name, "uid": j.metadata.uid} for j in jobs]
    labels = pod["metadata"]["labels"]
    labels.pop("tfps.dev/artifact-reader", None)
    labels[TENSORBOARD_LABEL] = first.metadata.name
    return pod


_READY = (
    "import urllib.request,sys;"
    f"sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:{PORT}/data/environment',timeout=2).status==200 else 1)"
)
"""Ready once TensorBoard answers on loopback (an exec probe: the kubelet's HTTP probe dials the pod IP)."""
