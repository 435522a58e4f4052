"""Child processes of `tfps run`: exit codes, logs, process-group stop, and no orphans when the runner dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tfps_operator.tools.local.ports import free_ports, is_free, listener_range, looks_like_port_in_use
from tfps_operator.tools.local.procs import Child, stop_all


def _child(tmp_path: Path, name: str, code: str) -> Child:
    return Child(
        name=name,
        argv=[sys.executable, "-c", textwrap.dedent(code)],
        env=dict(os.environ),
        log_path=tmp_path / f"{name}.log",
        termination_log=tmp_path / f"{name}.term",
    )


def _wait(child: Child, timeout: float = 20) -> int:
    end = time.monotonic() + timeout
    while (code := child.poll()) is None:
        assert time.monotonic() < end, f"{child.name} did not exit"
        time.sleep(0.05)
    return code


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as dead
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _wait_dead(pids, timeout: float = 10) -> list[int]:
    end = time.monotonic() + timeout
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < end:
        time.sleep(0.05)
    return alive


def test_exit_code_reason_and_tail_of_latest_start(tmp_path):
    c = _child(
        tmp_path,
        "worker-0",
        """
        import os, sys
        print("first start line")
        open(os.environ["TERM_LOG"], "w").write("boom: bad things\\n")
        sys.exit(3)
    """,
    )
    c.env["TERM_LOG"] = str(c.termination_log)
    c.start()
    assert _wait(c) == 3
    c.start()  # a restart appends to the same log; tail shows only the latest start
    assert _wait(c) == 3
    assert c.starts == 2
    assert c.log_path.read_text().count("first start line") == 2
    assert c.tail().count("first start line") == 1
    msg = c.describe_failure(3)
    assert "worker-0 exited with code 3: boom: bad things" in msg
    assert str(c.log_path) in msg


def test_killed_by_signal_reports_128_plus_n(tmp_path):
    c = _child(tmp_path, "ps-0", "import time; time.sleep(60)")
    c.start()
    os.kill(c.pid, signal.SIGKILL)
    assert _wait(c) == 128 + signal.SIGKILL


def test_stop_all_kills_group_and_stubborn_children(tmp_path):
    stubborn = _child(
        tmp_path,
        "stubborn",
        """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        deaf = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
        sub = subprocess.Popen([sys.executable, "-c", deaf])
        print(sub.pid, flush=True)
        time.sleep(60)
    """,
    )
    polite = _child(tmp_path, "polite", "import time; time.sleep(60)")
    stubborn.start()
    polite.start()
    end = time.monotonic() + 20
    while not stubborn.tail().strip().splitlines()[-1:] or not stubborn.tail().strip().splitlines()[-1].isdigit():
        assert time.monotonic() < end
        time.sleep(0.05)
    grandchild = int(stubborn.tail().strip().splitlines()[-1])
    t0 = time.monotonic()
    stop_all([stubborn, polite], grace=1.0)
    assert time.monotonic() - t0 < 10
    assert polite.poll() == 128 + signal.SIGTERM
    assert stubborn.poll() == 128 + signal.SIGKILL
    assert _wait_dead([grandchild]) == [], "the grandchild in the process group must be killed too"


def test_children_die_with_a_sigkilled_runner(tmp_path):
    """Even `kill -9` of the runner leaves no orphan (PR_SET_PDEATHSIG)."""
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import os, sys, time
            from pathlib import Path
            from tfps_operator.tools.local.procs import Child
            tmp = Path({str(tmp_path)!r})
            argv = [sys.executable, "-c", "import time; time.sleep(120)"]
            kids = [Child(name=f"k{{i}}", argv=argv, env=dict(os.environ),
                          log_path=tmp / f"k{{i}}.log", termination_log=tmp / f"k{{i}}.term") for i in range(3)]
            for k in kids: k.start()
            print(" ".join(str(k.pid) for k in kids), flush=True)
            time.sleep(120)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pids = [int(p) for p in runner.stdout.readline().split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    runner.kill()
    runner.wait()
    assert _wait_dead(pids) == [], f"orphans left: {pids}"


def test_ports():
    ports = free_ports(5)
    assert len(set(ports)) == 5
    span = listener_range()
    if span is not None:  # Linux: below the ephemeral range, where no outgoing connection takes a port
        assert all(span[0] <= p <= span[1] for p in ports), (span, ports)
    assert all(is_free(p) for p in ports)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))
        s.listen()
        assert not is_free(ports[0])
    assert looks_like_port_in_use("E0000 ... bind: Address already in use")
    assert looks_like_port_in_use("OSError: [Errno 98] Address already in use")
    # TensorFlow 2.21's tf.distribute.Server on a taken port (seen with a real trainer):
    assert looks_like_port_in_use(
        "add_port.cc:83] Failed to add port to server: No address added out of total 1 resolved"
    )
    assert looks_like_port_in_use("tfps-trainer ps/0: internal error: UnknownError: Could not start gRPC server")
    assert not looks_like_port_in_use("ValueError: loss is NaN")


def test_listener_range_sits_below_the_ephemeral_range(tmp_path):
    f = tmp_path / "ip_local_port_range"
    f.write_text("32768\t60999\n")
    assert listener_range(f) == (16384, 32767)
    f.write_text("1500 2000\n")
    assert listener_range(f) is None  # no room below: free_ports falls back to the kernel's choice
    assert listener_range(tmp_path / "missing") is None
