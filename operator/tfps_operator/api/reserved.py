"""The paths, names and keys the operator's pods rely on, which a job may not take for its own.

One source for the CRD's rules (:mod:`.models`, so the API server refuses a job that takes one) and
for the builders that use them (``manifests/pods.py``, ``manifests/jobsettings.py``).
"""

from __future__ import annotations

from typing import Final

CONTAINER: Final = "trainer"
"""The trainer container of every pod (init containers need other names)."""

STORAGE_VOLUME: Final = "storage"
TMP_VOLUME: Final = "tmp"
CODE_VOLUME: Final = "code"
CREDENTIALS_VOLUME: Final = "storage-credentials"
VOLUMES: Final = (STORAGE_VOLUME, TMP_VOLUME, CODE_VOLUME, CREDENTIALS_VOLUME)
"""Pod volumes the operator adds: a template's volumes take other names."""

TMP_DIR: Final = "/tmp"
"""The trainer's scratch emptyDir and its HOME (the root filesystem is read-only)."""
CODE_DIR: Final = "/tfps-code"
"""Where ``spec.model.source`` (a ConfigMap) is mounted, read-only, in every pod."""
CREDENTIALS_DIR: Final = "/var/run/secrets/tfps/storage"
"""Where ``spec.storage.credentialsSecret`` is mounted, read-only."""
TERMINATION_LOG: Final = "/dev/termination-log"
"""The container's termination message: the operator reads each trainer's verdict from it."""
TRAINER_INSTALL_DIR: Final = "/opt/tfps"
"""The trainer image's Python environment (``trainer_image/Dockerfile``)."""

SYSTEM_DIRS: Final = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/run",
)
"""The container's system directories."""
STORAGE_PATH_FORBIDDEN: Final = {
    **dict.fromkeys(SYSTEM_DIRS, "a system directory of the container"),
    TMP_DIR: "the trainer's scratch space and HOME",
    CODE_DIR: "the code mount of spec.model.source",
    CREDENTIALS_DIR: "the storage credentials",
    TRAINER_INSTALL_DIR: "the trainer image's Python environment",
}
"""Where the job's volume (``spec.storage.mountPath``) may not go, nor under, nor above (it would hide
it), and what each is."""
TEMPLATE_MOUNT_FORBIDDEN: Final = {
    TMP_DIR: "the trainer's scratch space and HOME",
    CODE_DIR: "the code mount",
    CREDENTIALS_DIR: "the storage credentials",
    TERMINATION_LOG: "where the operator reads each container's verdict",
    "/proc": "the kernel's process filesystem",
    "/sys": "the kernel's system filesystem",
}
"""Where a template's own mounts may not go, nor under, and what each is (the job's storage mountPath
too). ``/`` and ``/dev`` themselves are refused as well; under ``/dev`` (``/dev/shm``) is allowed."""

ENV: Final = ("TF_CONFIG", "HOME")
ENV_PREFIX: Final = "TFPS_"
"""Environment variables the operator sets (``TFPS_JOB``, ``TFPS_*_DIR``...): a template sets others."""
CREDENTIALS_ENV: Final = "GOOGLE_APPLICATION_CREDENTIALS"
"""Set by the operator to the mounted key of ``spec.storage.credentialsSecret``."""

LABEL_PREFIX: Final = "tfps.dev/"
"""Labels and annotations under this prefix are the operator's (it finds and counts its pods by them)."""
POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
"""Set by the operator on every pod when gang scheduling is on."""
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""On a pod it would have Kueue admit that pod alone; the job is queued as a whole (its Workload)."""
