"""The TensorFlow settings each trainer role gets from its environment (``tfps_trainer.tf_env``), and that the
entry point sets them before a role imports TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tfps_trainer import tf_env
from tfps_wire.job_settings import JobSettings, Paths, ScriptSettings

ALLOCATOR = "TF_ONEDNN_USE_SYSTEM_ALLOCATOR"


@pytest.mark.parametrize("role", ["chief", "ps", "worker", "evaluator", "dispatcher", "dataworker"])
def test_every_role_is_quiet_and_fails_fast_and_only_a_ps_leaves_the_pool(role: str) -> None:
    got = tf_env.defaults(role)
    assert got["TF_CPP_MIN_LOG_LEVEL"] == "2" and got["GRPC_FAIL_FAST"] == "use_caller"
    assert (got.get(ALLOCATOR) == "true") == (role == "ps"), got


def test_a_value_the_environment_sets_wins() -> None:
    env = {ALLOCATOR: "false", "TF_CPP_MIN_LOG_LEVEL": "0"}
    tf_env.apply(env, "ps")
    assert env == {ALLOCATOR: "false", "TF_CPP_MIN_LOG_LEVEL": "0", "GRPC_FAIL_FAST": "use_caller"}


def _tf_config(role: str) -> str:
    cluster = {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"]}
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": 0}})


# The entry point in a process of its own (it installs signal handlers and reports once per process), with the
# role's runner replaced by one that prints what TensorFlow would be imported with: the contract mode's server,
# or the environment script mode gives the program.
ENTRY = """
import os, sys
from tfps_trainer import server
from tfps_trainer.script import env, wrapper
server.run = lambda task: print("allocator", os.environ.get("TF_ONEDNN_USE_SYSTEM_ALLOCATOR")) or 0
wrapper.run = lambda task, settings: print(
    "allocator", env.program_env(settings, task.task_type, task.task_index, "p").get("TF_ONEDNN_USE_SYSTEM_ALLOCATOR")
) or 0
from tfps_trainer.__main__ import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    ("role", "script"), [("ps", False), ("worker", False), ("ps", True), ("worker", True)], ids=str
)
def test_the_entry_point_sets_them_before_a_role_imports_tensorflow(role: str, script: bool, tmp_path) -> None:
    job = {"model_module": "m"} if not script else {"script": ScriptSettings(programs={role: ("python", "p.py")})}
    settings = JobSettings(job_name="j", steps=10, batch_size=8, paths=Paths(root=str(tmp_path)), **job)
    env = {k: v for k, v in os.environ.items() if k != ALLOCATOR}
    env.update(
        TF_CONFIG=_tf_config(role), TFPS_JOB=settings.to_env(), TFPS_TERMINATION_LOG=str(tmp_path / "termination")
    )
    out = subprocess.run([sys.executable, "-c", ENTRY], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"allocator {'true' if role == 'ps' else None}" in out.stdout.splitlines(), out.stdout
