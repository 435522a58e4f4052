"""The environment a script-mode program gets (TF-free), and Kubernetes' ``$(VAR)`` expansion.

=====================  ==================================================================================
``TF_CONFIG``          the cluster and this task, as for every trainer
``TFPS_JOB_DIR``       the job's directory on its volume: ``<mountPath>/<namespace>/<job>``
``TFPS_CHECKPOINT_DIR`` ``<job dir>/checkpoints``: write ``tf.train.CheckpointManager`` checkpoints here
                       (the chief's wrapper follows its ``checkpoint`` state file)
``TFPS_TENSORBOARD_DIR`` ``<job dir>/tensorboard``: TensorBoard event files
``TFPS_MODEL_DIR``     ``<job dir>/model``: save the final model here (a SavedModel in the directory, or
                       ``model.keras`` in it); the export converts and verifies it
                       (each of these three is ``spec.model.directories``' own where it names one)
``TFPS_SAMPLES_FILE``  ``<job dir>/model/samples.npz``: optional verification inputs (one array per
                       serving input name, first axis the example)
``TFPS_PROGRESS_FILE`` where :func:`tfps_trainer.script.report` writes step and loss for the wrapper
``TFPS_STEPS``         ``spec.training.steps`` when set
``TFPS_TASK_TYPE``,    this task's type and index (also in ``TF_CONFIG``)
``TFPS_TASK_INDEX``
``TF_USE_LEGACY_KERAS`` ``1`` (``spec.model.keras: legacy``, the default: ``tf.keras`` is Keras 2 from
                       tf_keras) or ``0`` (``keras3``)
``TFPS_DATA_SERVICE``  a job with a tf.data service: its dispatcher, ``grpc://host:port`` (docs/data-service.md)
``TFPS_DATA_SERVICE_MODE`` ``dynamic`` or ``off`` (``spec.training.dataService.processingMode``)
=====================  ==================================================================================
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath

from tfps_wire.job_settings import JobSettings

JOB_DIR_ENV = "TFPS_JOB_DIR"
CHECKPOINT_DIR_ENV = "TFPS_CHECKPOINT_DIR"
TENSORBOARD_DIR_ENV = "TFPS_TENSORBOARD_DIR"
MODEL_DIR_ENV = "TFPS_MODEL_DIR"
SAMPLES_FILE_ENV = "TFPS_SAMPLES_FILE"
PROGRESS_FILE_ENV = "TFPS_PROGRESS_FILE"
STEPS_ENV = "TFPS_STEPS"
SAMPLES_FILE = "samples.npz"
KERAS_FILE = "model.keras"

_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def samples_file(settings: JobSettings) -> str:
    return str(PurePosixPath(settings.paths.model) / SAMPLES_FILE)


def program_env(
    settings: JobSettings, task_type: str, task_index: int, progress_file: str, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The program's environment: ``base`` (default: ours) plus the documented variables."""
    env = dict(os.environ if base is None else base)
    p = settings.paths
    env.update(
        {
            JOB_DIR_ENV: p.root,
            CHECKPOINT_DIR_ENV: settings.checkpoint_dir,
            TENSORBOARD_DIR_ENV: settings.tensorboard_dir,
            MODEL_DIR_ENV: settings.model_dir,
            SAMPLES_FILE_ENV: samples_file(settings),
            PROGRESS_FILE_ENV: progress_file,
            "TFPS_TASK_TYPE": task_type,
            "TFPS_TASK_INDEX": str(task_index),
        }
    )
    if settings.steps is not None:
        env[STEPS_ENV] = str(settings.steps)
    if settings.script is not None:
        env.update(settings.script.keras_env())
    if settings.data_service is not None:
        env.update(settings.data_service.script_env())
    if settings.code_dir:
        env["PYTHONPATH"] = os.pathsep.join(x for x in (settings.code_dir, env.get("PYTHONPATH", "")) if x)
    return env


def expand(argv: tuple[str, ...] | list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' expansion of a container command: ``$(VAR)`` becomes the variable's value when it is
    defined (else stays as written), ``$$`` becomes ``$``."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return [_REF.sub(one, a) for a in argv]
