"""The cluster box's pure parts (cgroup v1 and v2 file formats, layout detection, the starvation verdict) and the
scaling benchmark's efficiency arithmetic; the v2 cgroup code path on a fake cgroup tree (this machine mounts v1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import cluster_box as cb  # noqa: E402
from scaling_bench import Shape, efficiency, steps_for  # noqa: E402

V1_CPU_STAT = "nr_periods 60\nnr_throttled 45\nthrottled_time 4296579291\nnr_bursts 0\nburst_time 0\n"
V2_CPU_STAT = (
    "usage_usec 1528045\nuser_usec 1500000\nsystem_usec 28045\ncore_sched.force_idle_usec 0\n"
    "nr_periods 60\nnr_throttled 45\nthrottled_usec 4296579\nnr_bursts 0\nburst_usec 0\n"
)
# This machine: every v1 controller its own hierarchy, and a cgroup2 mount with no controllers (hybrid).
HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = "4:memory:/process_api/b2a7\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n9:name=systemd:/\n0::/\n"
V2_MOUNTINFO = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/user.slice/user-0.slice/session-1.scope\n"


# ---- file formats ------------------------------------------------------------------------------------------


def test_v1_and_v2_cpu_stat_read_to_the_same_units():
    v1, v2 = cb.parse_v1_cpu_stat(V1_CPU_STAT), cb.parse_v2_cpu_stat(V2_CPU_STAT)
    assert v1 == cb.CpuStat(usage_ns=None, periods=60, throttled_periods=45, throttled_ns=4296579291)
    assert v2 == cb.CpuStat(usage_ns=1528045000, periods=60, throttled_periods=45, throttled_ns=4296579000)


def test_v2_cpu_max_and_v1_quota_read_as_cores():
    assert cb.parse_v2_cpu_max("25000 100000\n") == (0.25, 100000)
    assert cb.parse_v2_cpu_max("max 100000\n") == (None, 100000)
    assert cb.parse_v2_cpu_max("150000 50000") == (3.0, 50000)
    assert cb.parse_v1_quota("30000\n", "100000\n") == 0.3
    assert cb.parse_v1_quota("-1\n", "100000\n") is None


def test_memory_limits_max_and_page_counter_max_mean_none():
    assert cb.parse_memory_bytes("max\n") is None
    assert cb.parse_memory_bytes("9223372036854771712\n") is None  # v1's "unlimited"
    assert cb.parse_memory_bytes("268435456\n") == 256 << 20


def test_limits_become_the_files_of_each_version():
    lim = cb.Limits(0.25, 256 << 20)
    assert cb.v1_limit_files(lim) == {
        "cpu": {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "25000"},
        "memory": {"memory.limit_in_bytes": "268435456"},
    }
    assert cb.v2_limit_files(lim) == {"cpu.max": "25000 100000", "memory.max": "268435456", "memory.swap.max": "0"}
    assert cb.v1_limit_files(cb.Limits(None)) == {
        "cpu": {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"},
        "memory": {},
    }
    assert cb.v2_limit_files(cb.Limits(None)) == {"cpu.max": "max 100000"}
    assert cb.v2_limit_files(cb.Limits(2.0), period_us=50_000) == {"cpu.max": "100000 50000"}
    with pytest.raises(ValueError, match="under the kernel's 1 ms"):
        cb.quota_us(0.005)


def test_schedstat_and_proc_stat():
    assert cb.parse_schedstat("1038071349 1318751 46\n") == (1038071349, 1318751)
    # user nice system idle iowait irq softirq steal guest guest_nice: busy counts steal, not iowait
    assert cb.parse_proc_stat_cpu("cpu  100 5 50 1000 20 3 2 7 40 0\ncpu0 1 2 3 4\n") == (167, 1020)


# ---- layout ------------------------------------------------------------------------------------------------


def test_a_hybrid_host_is_v1_and_each_controller_nests_under_the_callers_own_cgroup():
    layout = cb.detect_layout(HYBRID_MOUNTINFO, HYBRID_CGROUP, {Path("/sys/fs/cgroup/unified"): ""})
    assert layout.version == 1
    assert layout.dirs == {
        "cpu": Path("/sys/fs/cgroup/cpu"),
        "cpuacct": Path("/sys/fs/cgroup/cpuacct"),
        "memory": Path("/sys/fs/cgroup/memory/process_api/b2a7"),
    }


def test_v2_is_chosen_when_its_mount_offers_cpu_and_memory():
    controllers = {Path("/sys/fs/cgroup"): "cpuset cpu io memory pids\n"}
    layout = cb.detect_layout(V2_MOUNTINFO, V2_CGROUP, controllers)
    assert layout == cb.Layout(2, {"": Path("/sys/fs/cgroup/user.slice/user-0.slice/session-1.scope")})
    # a v2 mount without the memory controller is no use, and without v1 hierarchies there is nothing
    with pytest.raises(cb.CgroupUnavailable, match="no cgroup v2 mount with cpu and memory"):
        cb.detect_layout(V2_MOUNTINFO, V2_CGROUP, {Path("/sys/fs/cgroup"): "cpu io pids"})


def test_combined_v1_hierarchies_and_a_bind_mounted_subtree():
    mountinfo = (
        "40 31 0:37 /kubepods/pod1 /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:38 /kubepods/pod1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    )
    own = "5:cpu,cpuacct:/kubepods/pod1/c1\n4:memory:/kubepods/pod1\n"
    layout = cb.detect_layout(mountinfo, own, {})
    assert layout.dirs["cpu"] == layout.dirs["cpuacct"] == Path("/sys/fs/cgroup/cpu,cpuacct/c1")
    assert layout.dirs["memory"] == Path("/sys/fs/cgroup/memory")
    assert layout.hierarchies == [Path("/sys/fs/cgroup/cpu,cpuacct/c1"), Path("/sys/fs/cgroup/memory")]
    with pytest.raises(cb.CgroupUnavailable, match="outside the mount"):
        cb.detect_layout(mountinfo, "5:cpu,cpuacct:/other\n4:memory:/kubepods/pod1\n", {})


def test_cell_names_must_be_plain():
    with pytest.raises(ValueError, match="cell name"):
        cb.ClusterBox({"../escape": cb.Limits(0.1)}, layout=cb.Layout(2, {"": Path("/nonexistent")}))


# ---- the starvation verdict ----------------------------------------------------------------------------------


def _samples(rows: list[tuple[float, float, int, float]]) -> list[cb.Sample]:
    """Cumulative samples from per-interval rows (seconds, CPU seconds, throttled periods, wait seconds)."""
    out = [cb.Sample(0.0, 0, 0, 0, 0, 0, 0, 0)]
    for dt, cpu, throttled, wait in rows:
        p = out[-1]
        out.append(
            cb.Sample(
                p.t + dt,
                p.cpu_ns + int(cpu * 1e9),
                p.periods + 1,
                p.throttled_periods + throttled,
                p.throttled_ns,
                p.wait_ns + int(wait * 1e9),
                100,
                200,
            )
        )
    return out


def test_a_process_throttled_every_period_got_its_quota_whatever_it_waited():
    s = _samples([(0.1, 0.025, 1, 0.075)] * 10)  # a busy loop at 0.25 core: its wait is the quota's
    u = cb.usage_of("loop", cb.Limits(0.25), s, [True] * 10)
    assert u.cores == pytest.approx(0.25) and u.quota_share == pytest.approx(1.0)
    assert u.contended_seconds == 0 and u.denied_cpu_seconds == 0
    assert cb.starvation([u]) == []


def test_waiting_below_quota_on_an_overcommitted_machine_is_denied_cpu():
    s = _samples([(0.1, 0.015, 0, 0.085)] * 10)  # never throttled, used 0.15 of 0.5, waited the rest
    u = cb.usage_of("worker-0", cb.Limits(0.5), s, [True] * 10)
    assert u.contended_seconds == pytest.approx(1.0)
    assert u.denied_cpu_seconds == pytest.approx(0.35)  # min(headroom 0.35, wait 0.85)
    assert u.denied_share == pytest.approx(0.7)
    (verdict,) = cb.starvation([u])
    assert verdict.startswith("worker-0 was denied 70% of its 0.5-core quota (limit 5%)")
    assert "used 0.150 cores" in verdict and "throttled in 0 of 10 periods" in verdict
    with pytest.raises(cb.Starved, match="worker-0 was denied 70%") as e:
        cb.check([u])
    assert e.value.verdicts == [verdict]


def test_the_same_wait_on_a_machine_with_room_is_latency_not_denial():
    s = _samples([(0.1, 0.015, 0, 0.085)] * 10)
    assert cb.usage_of("chief-0", cb.Limits(0.5), s, [False] * 10).denied_cpu_seconds == 0


def test_wait_right_after_a_throttled_interval_is_the_quotas():
    # throttled in interval 0; its wait lands in interval 1 (added when the thread runs again); 2 is clean
    s = _samples([(0.1, 0.03, 1, 0.0), (0.1, 0.01, 0, 0.07), (0.1, 0.01, 0, 0.02)])
    u = cb.usage_of("ps-0", cb.Limits(0.3), s, [True] * 3)
    assert u.contended_seconds == pytest.approx(0.1)
    assert u.denied_cpu_seconds == pytest.approx(0.02)  # interval 2 only: min(headroom 0.02, wait 0.02)


def test_denial_is_bounded_by_the_wait_and_below_the_limit_passes():
    s = _samples([(0.1, 0.01, 0, 0.001)] * 10)  # mostly idle: 0.01 s of wait in 1 s
    u = cb.usage_of("ps-0", cb.Limits(0.5), s, [True] * 10)
    assert u.denied_cpu_seconds == pytest.approx(0.01)
    assert u.denied_share == pytest.approx(0.02)
    assert cb.starvation([u]) == [] and cb.starvation([u], max_denied=0.01) != []
    unlimited = cb.usage_of("x", cb.Limits(None), s, [True] * 10)
    assert unlimited.denied_share is None and cb.starvation([unlimited], max_denied=0) == []


def test_overcommitted_when_others_and_unused_quota_exceed_the_machine():
    hz = 100
    # 2 CPUs, 0.1 s samples: 20 ticks each; busy 18 of 20
    machine = [cb.MachineSample(i * 0.1, 18 * i, 2 * i) for i in range(11)]
    assert cb.overcommitted_intervals(machine, [0.0] * 10, hz) == [False] * 10  # 90 % busy, nothing unused
    assert cb.overcommitted_intervals(machine, [0.02] * 10, hz) == [True] * 10  # 0.2 core of quota unused: 100 %
    # one saturated instant among idle ones is smoothed over SPAN seconds
    spiky = [cb.MachineSample(0.0, 0, 0)]
    for i in range(1, 11):
        busy = 20 if i == 5 else 10
        p = spiky[-1]
        spiky.append(cb.MachineSample(i * 0.1, p.busy_ticks + busy, p.idle_ticks + 20 - busy))
    assert not any(cb.overcommitted_intervals(spiky, [0.0] * 10, hz))
    assert cb.overcommitted_intervals(spiky, [0.0] * 10, hz, span=0.1)[4]


def test_unused_quota_and_window():
    s = _samples([(0.1, 0.01, 0, 0), (0.1, 0.05, 1, 0)])
    assert cb.unused_quota(0.3, s) == pytest.approx([0.02, 0.0])
    assert cb.unused_quota(None, s) == [0.0, 0.0]
    assert cb.window([0.0, 0.1, 0.2, 0.3, 0.4], 0.15, 0.25) == (1, 3)
    assert cb.window([0.0, 0.1, 0.2], 0.1, 0.2) == (1, 2)
    with pytest.raises(ValueError, match="do not cover"):
        cb.window([0.0, 0.1], 0.05, 0.5)


# ---- the v2 code path on a fake cgroup tree -----------------------------------------------------------------


def test_v2_cells_get_their_limits_and_are_sampled_from_v2_files(tmp_path):
    own = tmp_path / "session.scope"
    own.mkdir()
    box = cb.ClusterBox({"ps-0": cb.Limits(0.25, 256 << 20)}, layout=cb.Layout(2, {"": own}), run_id="1-2")
    box.create()
    run = own / cb.PARENT / "1-2"
    for d in (own, own / cb.PARENT, run):
        assert (d / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert (run / "cpu.weight").read_text() == "100"
    cell = run / "ps-0"
    assert (cell / "cpu.max").read_text() == "25000 100000"
    assert (cell / "memory.max").read_text() == str(256 << 20)
    (cell / "cpu.stat").write_text(V2_CPU_STAT)
    (cell / "memory.current").write_text("1000\n")
    (cell / "memory.peak").write_text("5000\n")
    (cell / "memory.stat").write_text("anon 700\nfile 300\nkernel 0\n")
    (cell / "cgroup.threads").write_text("".join(f"{tid}\n" for tid in os.listdir("/proc/self/task")))
    box.sample()
    (s,) = box.samples("ps-0")
    assert (s.cpu_ns, s.periods, s.throttled_periods, s.throttled_ns) == (1528045000, 60, 45, 4296579000)
    assert (s.memory_bytes, s.peak_memory_bytes, s.anon_bytes) == (1000, 5000, 700)
    assert s.wait_ns > 0  # this test's own threads' run-queue delay, from /proc/<tid>/schedstat


def test_the_wrapper_moves_the_process_itself_before_it_execs(tmp_path):
    layout = cb.Layout(1, {"cpu": tmp_path / "cpu", "cpuacct": tmp_path / "cpu", "memory": tmp_path / "mem"})
    box = cb.ClusterBox({"worker-0": cb.Limits(0.3)}, layout=layout, run_id="1-2")
    for d in {*box.cells["worker-0"].dirs.values()}:
        d.mkdir(parents=True)
    argv = box.command("worker-0", [sys.executable, "-c", "import os; print(os.getpid())"])
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    pid = out.stdout.strip()
    # cpu and cpuacct share a hierarchy here: one write each for two hierarchies
    assert argv[2].count("cgroup.procs") == 2
    assert (tmp_path / "cpu" / cb.PARENT / "1-2" / "worker-0" / "cgroup.procs").read_text().strip() == pid
    assert (tmp_path / "mem" / cb.PARENT / "1-2" / "worker-0" / "cgroup.procs").read_text().strip() == pid
    (tmp_path / "mem" / cb.PARENT / "1-2" / "worker-0" / "cgroup.procs").unlink()
    (tmp_path / "mem" / cb.PARENT / "1-2" / "worker-0").rmdir()
    failed = subprocess.run(box.command("worker-0", ["echo", "ran"]), capture_output=True, text=True)
    assert failed.returncode != 0 and "ran" not in failed.stdout  # no cell, no exec


# ---- the benchmark's arithmetic ------------------------------------------------------------------------------


def test_efficiency_is_rate_over_n_times_the_rate_of_one():
    e = efficiency({1: 100.0, 2: 180.0, 4: 340.0})
    assert e[1] == {"rate": 100.0, "limit": 100.0, "efficiency": 1.0}
    assert e[2]["limit"] == 200.0 and e[2]["efficiency"] == pytest.approx(0.9)
    assert e[4]["limit"] == 400.0 and e[4]["efficiency"] == pytest.approx(0.85)
    # without a point at 1 the smallest n is the base, per unit
    assert efficiency({2: 200.0, 4: 300.0})[4]["efficiency"] == pytest.approx(0.75)
    assert efficiency({}) == {}


def test_shapes_name_every_process_and_sum_their_quotas():
    shape = Shape(4, 1, cb.Limits(0.1), cb.Limits(0.4), cb.Limits(0.3))
    assert list(shape.limits()) == ["chief-0", "ps-0", "worker-0", "worker-1", "worker-2", "worker-3"]
    assert shape.quota_cores == pytest.approx(1.7)
    assert steps_for(1000, 3, 20) == 3000 and steps_for(101, 1, 20) == 120
