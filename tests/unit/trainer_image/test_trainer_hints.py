"""The classic PS-training failures are recognised in a trainer's output, and floods of repeated lines
are rate-limited in what the log keeps (TF-free: tfps_trainer.hints and tfps_trainer.logfilter)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from tfps_trainer.hints import Scanner, find, hopeless
from tfps_trainer.logfilter import RateLimiter, most_lines, shape
from tfps_wire import exitcodes

UNKNOWN_DEVICE = (
    "2026-12-03 12:00:01.{n:06d}: W tensorflow/core/framework/op_kernel.cc:1839] OP_REQUIRES failed at "
    "lookup_table_op.cc:{n}: INVALID_ARGUMENT: unknown device /job:chief/replica:0/task:0/device:CPU:0 "
    "(thread 0x7f{n:x})\n"
)


def test_a_repeated_line_is_kept_burst_times_then_counted_at_each_power_of_ten():
    limiter = RateLimiter(burst=3)
    kept = []
    for n in range(1003):
        kept += limiter.feed(UNKNOWN_DEVICE.format(n=n))
    kept += limiter.feed("tfps-trainer chief: checkpoint step 100\n")
    assert kept[:3] == [UNKNOWN_DEVICE.format(n=n) for n in range(3)]
    assert [line.split(" line(s)")[0] for line in kept[3:6]] == [
        "[tfps] 10 more",
        "[tfps] 100 more",
        "[tfps] 1000 more",
    ]
    assert all("were not logged so far: " in line and "unknown device" in line for line in kept[3:6])
    assert kept[-1].startswith("tfps-trainer chief: checkpoint") and len(kept) == 7
    assert limiter.close() == []  # the last count (1000) was just written
    kept = [line for n in range(1003, 1010) for line in limiter.feed(UNKNOWN_DEVICE.format(n=n))]
    assert kept == []  # however much later: a line never comes back in full
    (rest,) = limiter.close()
    assert rest.startswith("[tfps] 1007 more line(s) like this one were not logged: ") and "unknown device" in rest
    assert shape("step 17 at 0x7ffe") == shape("step 18 at 0x1a")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a 1", "a 2", "b 3", "c", "d 0x1f"]), max_size=3000), st.integers(1, 6))
def test_what_the_limiter_writes_is_bounded_by_counts_alone(lines: list[str], burst: int) -> None:
    limiter = RateLimiter(burst=burst)
    out = [kept for line in lines for kept in limiter.feed(line)] + limiter.close()
    for key in {shape(line) for line in lines}:
        copies = sum(shape(line) == key for line in lines)
        written = [line for line in out if shape(line.rsplit(": ", 1)[-1]) == key]
        assert len(written) <= most_lines(copies, burst)
        assert sum(not line.startswith("[tfps]") for line in written) == min(copies, burst)
        held = [int(line.split()[1]) for line in written if line.startswith("[tfps]")]
        assert held == sorted(held) and (held[-1] if held else 0) == max(0, copies - burst)


def test_lines_of_more_shapes_than_counted_pass_uncounted():
    limiter = RateLimiter(burst=1, max_shapes=2)
    assert [limiter.feed(x) for x in ("a", "a", "b", "c", "c")] == [["a"], [], ["b"], ["c"], ["c"]]


def test_classic_failures_get_their_hint_the_cause_before_the_symptom():
    scanner = Scanner()
    scanner.feed(
        "F tensorflow/core/platform/default/env.cc:74] Check failed: ret == 0 (11 vs. 0)Thread creation via "
        "pthread_create() failed.\n"
    )
    assert scanner.best().name == "ThreadsExhausted"
    scanner.feed(UNKNOWN_DEVICE.format(n=1))
    assert scanner.best().name == "OutsideScope"  # the cause wins over its symptom
    assert "strategy.scope()" in scanner.best().hint and "build_model()" in scanner.best().hint
    reason = (
        "internal error: ClosureInputError: Failed to fetch the input of a closure. unknown device "
        "/job:chief/replica:0/task:0/device:CPU:0"
    )
    assert find(reason).name == "OutsideScope"
    assert hopeless(reason).name == "OutsideScope"  # an error in the main thread ends the run as the flood would
    assert hopeless("ThreadsExhausted: pthread_create() failed") is None
    assert (
        find("tfps-trainer chief: parameter server(s) ps/1 (127.0.0.1:2223) not reachable after 600s").name
        == "ParameterServerUnreachable"
    )
    assert find("checkpoint step 100 -> /tfps/ckpt-100") is None


def test_a_flood_on_file_descriptor_2_reaches_the_log_rate_limited_with_its_hint(tmp_path):
    """What TensorFlow's C++ code writes goes to fd 2 directly, past sys.stderr: the filter sits on the fd."""
    script = textwrap.dedent(f"""
        import os, sys
        from tfps_trainer.logfilter import StderrFilter
        out = StderrFilter()
        line = {UNKNOWN_DEVICE!r}
        for n in range(20000):
            os.write(2, line.format(n=n).encode())
        print("python-level line", file=sys.stderr)
        out.close()
        print("after: " + out.hint(), file=sys.stderr)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sum("unknown device" in ln and not ln.startswith("[tfps]") for ln in lines) == 5
    counts = [ln.split(" line(s)")[0] for ln in lines if ln.startswith("[tfps]")]
    assert counts == ["[tfps] 10 more", "[tfps] 100 more", "[tfps] 1000 more", "[tfps] 10000 more", "[tfps] 19995 more"]
    assert len(lines) == most_lines(20000) + 2, lines  # with the Python-level line and "after"
    assert "python-level line" in lines
    assert lines[-1].startswith("after: hint: a resource used by the training step")


def test_after_a_failed_run_is_closed_background_logging_writes_nothing(tmp_path):
    """A coordinator thread that goes on logging each lost closure after the filter closed on a failure,
    through Python's logging or straight to fd 2 as TensorFlow's C++ code does, stays out of the log: the
    report written after it (to sys.stderr) is the last line, however long the process takes to exit."""
    script = textwrap.dedent(f"""
        import logging, os, sys, threading, time
        from tfps_trainer.errors import _mute_output
        from tfps_trainer.logfilter import StderrFilter
        out = StderrFilter()
        stop = threading.Event()
        def coordinator():
            n = 0
            while not stop.is_set():
                n += 1
                logging.getLogger("tensorflow").error({UNKNOWN_DEVICE!r}.strip())
                os.write(2, ("C++ " + {UNKNOWN_DEVICE!r}.format(n=n)).encode())
                time.sleep(0.0005)
        thread = threading.Thread(target=coordinator, daemon=True)
        thread.start()
        time.sleep(0.2)
        out.close(run_failed=True)
        time.sleep(0.3)
        print("the report", file=sys.stderr, flush=True)
        _mute_output()
        time.sleep(0.2)
        print("muted", file=sys.stderr, flush=True)
        stop.set()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert lines[-1] == "the report", lines[-10:]
    assert sum(ln.startswith("C++ ") for ln in lines) == 5, lines  # before the close: the burst, then counts
    assert len(lines) <= 1 + 2 * most_lines(10**6), lines


def test_a_flood_that_never_ends_becomes_fatal_once():
    scanner = Scanner()
    fatal = [scanner.feed(UNKNOWN_DEVICE.format(n=n)) for n in range(500)]
    assert [i for i, h in enumerate(fatal) if h is not None] == [199]
    assert scanner.fatal[0].name == "OutsideScope" and "unknown device" in scanner.fatal[1]


def test_a_hopeless_run_whose_main_thread_ignores_the_interrupt_still_ends_with_its_hint(tmp_path):
    """The flood interrupts the main thread; one that never sees the interrupt (blocked where a signal does
    not reach Python, simulated by ignoring SIGINT) does not keep the process alive: after the grace period
    the failure is reported (termination log, last stderr line) and the process exits as the model's fault."""
    termination = tmp_path / "termination-log"
    script = textwrap.dedent(f"""
        import os, signal, time
        from tfps_trainer import __main__ as entry
        from tfps_trainer.logfilter import StderrFilter
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        out = StderrFilter(on_fatal=lambda: entry.stop_hopeless_run("chief/0", out, grace=1.0))
        line = {UNKNOWN_DEVICE!r}
        for n in range(300):
            os.write(2, line.format(n=n).encode())
        time.sleep(60)
    """)
    env = {**os.environ, "TFPS_TERMINATION_LOG": str(termination)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50, env=env)
    assert time.monotonic() - started < 45  # the sleep would have taken 60
    assert proc.returncode == exitcodes.CONTRACT, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("tfps-trainer chief/0: training cannot proceed:") and "unknown device" in last, last
    assert "hint: a resource used by the training step" in last and last.count("hint:") == 1, last
    assert termination.read_text().strip().splitlines()[-1] == last


KERAS3_FAILURES = (
    # Keras 3 model.fit on a ParameterServerStrategy dataset
    "ValueError: To use this dataset, you need to pass this dataset to ClusterCoordinator.create_per_worker_dataset.",
    # Keras 2 ModelCheckpoint(save_weights_only=True) with a TF checkpoint prefix
    "ValueError: When using `save_weights_only=True` in `ModelCheckpoint`, the filepath provided must end in "
    "`.weights.h5` (Keras weights format). Received: filepath=/data/ckpt/weights",
    # Keras 2 model.save(dir)
    "ValueError: Invalid filepath extension for saving. Please add either a `.keras` extension for the native "
    "Keras format (recommended) or a `.h5` extension.",
    # Keras 2 optimizer.lr
    "AttributeError: 'SGD' object has no attribute 'lr'",
    "AttributeError: 'Adam' object has no attribute 'lr'",
)


def test_a_keras_2_program_under_keras_3_is_recognised_and_named_deterministic():
    for line in KERAS3_FAILURES:
        hint = find(line)
        assert hint is not None and hint.name == "Keras3Incompatible" and hint.exit_code == exitcodes.INCOMPATIBLE, line
        assert "spec.model.keras: legacy" in hint.hint
    assert find("AttributeError: 'Model' object has no attribute 'lr_schedule'") is None
    assert find("ValueError: Shapes (None, 1) and (None, 10) are incompatible") is None


def test_a_program_failing_on_a_deterministic_hint_exits_incompatible_with_its_own_code_in_the_reason():
    from tfps_trainer.script.wrapper import describe_exit, failure_code

    scanner = Scanner()
    for line in ["Epoch 1/3", KERAS3_FAILURES[0]]:
        scanner.feed(line)
    hint = scanner.best()
    assert hint is not None
    assert failure_code(1, hint) == exitcodes.INCOMPATIBLE
    assert exitcodes.kind(exitcodes.INCOMPATIBLE) == "permanent"
    assert failure_code(exitcodes.PREEMPTED, hint) == exitcodes.PREEMPTED  # a preemption stays one
    reason = describe_exit(["python", "train.py"], 1, ["Epoch 1/3", KERAS3_FAILURES[0]], hint)
    assert reason.startswith("program python train.py exited with code 1; hint (Keras3Incompatible): ")
    assert "last lines: Epoch 1/3" in reason
    # a hint that is not deterministic keeps the program's code
    other = Scanner()
    other.feed("/job:ps/replica:0/task:0 UNAVAILABLE: Socket closed")
    assert failure_code(1, other.best()) == 1


def test_a_worker_that_failed_because_its_all_reduce_peer_died_reports_a_lost_cluster_not_its_own_fault():
    """As TensorFlow's MultiWorkerMirroredStrategy reports it when another worker was killed mid-step."""
    from tfps_trainer.script.wrapper import failure_code

    scanner = Scanner()
    for line in [
        "Epoch 2/5",
        "Collective ops is aborted by: recvmsg:Connection reset by peer",
        "\t [[{{node CollectiveReduceV2}}]] [Op:__inference_train_function_568]",
    ]:
        scanner.feed(line)
    hint = scanner.best()
    assert hint is not None and hint.name == "CollectivePeerLost"
    assert failure_code(1, hint) == exitcodes.LOST_CLUSTER and exitcodes.kind(exitcodes.LOST_CLUSTER) == "retryable"
    assert find("ValueError: Collective shapes differ") is None
