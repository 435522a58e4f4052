"""A tf.data service that cannot serve fails, with the reason, within the startup timeout (docs/data-service.md).

A real dispatcher runs, but neither data worker reaches it: one is told an address where nothing listens (a
network that drops it), the other an address that accepts connections and never answers (a dispatcher that
hangs; TensorFlow's registration would retry there for an hour, holding the GIL). Each data worker fails
within ``TFPS_STARTUP_TIMEOUT`` with its reason in its termination log; the chief, whose dispatcher is up,
registers the dataset, reads nothing within the same timeout and fails naming the data workers, instead of
every training worker waiting for elements forever.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest
from trainer_cluster import LocalCluster, checkpoint_steps, make_settings

from tfps_operator.tools.local.ports import free_ports
from tfps_wire import exitcodes
from tfps_wire.job_settings import DataServiceSettings, JobSettings

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]

TIMEOUT = 20


def test_data_workers_that_cannot_register_fail_with_the_reason_and_the_chief_names_them(tmp_path: Path) -> None:
    hung = socket.socket()  # accepts (the kernel's backlog) and never answers: a dispatcher that hangs
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    hung_address = f"127.0.0.1:{hung.getsockname()[1]}"
    (nothing,) = free_ports(1)
    nothing_address = f"127.0.0.1:{nothing}"

    base = make_settings(tmp_path / "job", steps=50)
    cluster = LocalCluster(
        tmp_path / "procs", base, ps=1, workers=1, dispatcher=1, dataworkers=2,
        extra_env={"TFPS_STARTUP_TIMEOUT": str(TIMEOUT)},
    )  # fmt: skip
    workers = (cluster.address("dataworker", 0), cluster.address("dataworker", 1))
    service = DataServiceSettings(
        dispatcher=cluster.address("dispatcher", 0),
        data_workers=workers,
        work_dir=str(tmp_path / "job" / "data-service"),
        dataset_id="tfps-train",
        iteration="tfps-train",
    )
    cluster.settings = base.model_copy(update={"data_service": service})

    def told(dispatcher: str) -> JobSettings:
        return base.model_copy(update={"data_service": service.model_copy(update={"dispatcher": dispatcher})})

    cluster.settings_of = {("dataworker", 0): told(nothing_address), ("dataworker", 1): told(hung_address)}
    with cluster, hung:
        for role, index in [("dispatcher", 0), ("dataworker", 0), ("dataworker", 1), ("ps", 0), ("worker", 0)]:
            cluster.start(role, index)
        # The chief waits TIMEOUT for these too: up before it starts, however long their TensorFlow import takes
        # beside the others', so that the chief fails on the data workers, not on a server still starting.
        for role in ("dispatcher", "ps", "worker"):
            cluster.wait_listening(role)
        started = time.monotonic()
        cluster.start("chief", 0)
        unreachable = cluster.wait("dataworker", 0, timeout=180)
        unregistered = cluster.wait("dataworker", 1, timeout=180)
        chief = cluster.wait("chief", timeout=180)
        took = time.monotonic() - started
        dispatcher_alive = cluster.procs[("dispatcher", 0)].poll() is None
        chief_last = cluster.log("chief", 0).read_text().strip().splitlines()[-1]
        dw0_last = cluster.log("dataworker", 0).read_text().strip().splitlines()[-1]
        dw1_log = cluster.log("dataworker", 1).read_text()
        termination = {i: cluster.termination_log("dataworker", i).read_text().strip() for i in (0, 1)}

    assert unreachable == exitcodes.INFRASTRUCTURE, dw0_last
    reason0 = f"tfps-trainer dataworker/0: tf.data service dispatcher {nothing_address} not reachable after {TIMEOUT}s"
    assert dw0_last == reason0 and termination[0] == reason0
    # the hung registration was ended by the kernel's alarm; its reason was in the termination log beforehand
    assert unregistered == -signal.SIGALRM, dw1_log[-2000:]
    assert "tfps-trainer dataworker/1: registering with the dispatcher (giving up in" in dw1_log
    assert termination[1] == (
        f"tfps-trainer dataworker/1: tf.data service dispatcher {hung_address} did not register this data worker "
        f"within {TIMEOUT}s"
    )
    assert chief == exitcodes.LOST_CLUSTER, chief_last
    assert chief_last.startswith(
        f"tfps-trainer chief/0: the tf.data service at {service.dispatcher} served no element within {TIMEOUT}s"
    ), chief_last
    assert f"dataworker/0 ({workers[0]})" in chief_last and f"dataworker/1 ({workers[1]})" in chief_last
    assert took < TIMEOUT + 120, took  # the timeout and the processes' start, not a hang
    assert dispatcher_alive  # the dispatcher was fine: the failure is the data workers'
    assert checkpoint_steps(base.paths.checkpoints) == []
