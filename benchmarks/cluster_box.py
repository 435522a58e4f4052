"""A cluster in a box: each process of a local benchmark in its own cgroup, with a CPU quota and a memory limit.

On two shared cores every TensorFlow process of a benchmark competes with every other, so no benchmark can show
throughput growing with workers or PS. A box gives each process (chief, each PS, each worker) a *cell*: a cgroup
capped at a CPU quota and a memory limit, so that N workers at 0.25 core each have N x 0.25 core between them, as
N machines would, as long as the quotas fit the machine. ``scaling_bench.py`` draws its curves this way.

Where the cgroups live. :func:`current_layout` reads ``/proc/self/mountinfo`` and ``/proc/self/cgroup``:

- cgroup v1 (this machine: ``cpu``, ``cpuacct`` and ``memory`` separate hierarchies, a controller-less
  ``unified`` v2 mount beside them): in each hierarchy, under the cgroup the caller itself is in,
  ``<own>/tfps-bench/<run-id>/<cell>`` (here ``/sys/fs/cgroup/cpu/tfps-bench/...`` and
  ``/sys/fs/cgroup/memory/<own memory cgroup>/tfps-bench/...``). Nesting under the caller's own cgroup keeps the
  benchmark inside whatever limits and accounting its caller is under; the kubelet's ``kubepods`` and everything
  else outside ``tfps-bench`` is never written. Files: ``cpu.cfs_period_us``/``cpu.cfs_quota_us`` (100 ms
  period), ``cpu.shares``, ``cpuacct.usage``, ``cpu.stat`` (``nr_periods``, ``nr_throttled``,
  ``throttled_time``), ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is accounted),
  ``memory.usage_in_bytes``, ``memory.max_usage_in_bytes``, ``memory.stat``, ``tasks``.
- cgroup v2 (chosen when a cgroup2 mount offers ``cpu`` and ``memory``): one tree, the same path under the
  caller's cgroup; ``cpu.max``, ``cpu.weight``, ``cpu.stat`` (``usage_usec``, ``nr_periods``, ``nr_throttled``,
  ``throttled_usec``), ``memory.max``, ``memory.swap.max``, ``memory.current``, ``memory.peak``, ``memory.stat``,
  ``cgroup.threads``. v2 forbids a cgroup that holds processes from delegating controllers, so the caller's own
  cgroup must have ``+cpu +memory`` in its ``cgroup.subtree_control`` (the only file outside ``tfps-bench`` the
  box writes) or ``TFPS_BENCH_CGROUP_PARENT`` must name a delegated, empty cgroup; otherwise
  :class:`CgroupUnavailable` says so. This machine has v1: the v2 path is tested on a fake cgroup tree
  (tests/benchmarks/test_cluster_box.py), not on a real v2 host.

A process enters its cell before it runs anything: :meth:`ClusterBox.command` wraps its argv in
``/bin/sh -c 'echo $$ > <cell>/cgroup.procs && ... && exec "$@"'``, so the pid written is the process that then
execs TensorFlow (no ``preexec_fn`` in a process with a sampler thread, no memory charged elsewhere first); a
failed write stops it before the exec. A run's group is weighted as its processes would be as nice-0 tasks
outside any cgroup (``cpu.shares`` 1024 x cells; v2 ``cpu.weight`` 100 x cells): a group counts as one task
however many it holds, and would otherwise lose to the machine's other tasks; it is not favoured over them.
On leaving the ``with`` block, also on an exception or Ctrl-C (``scaling_bench`` turns SIGTERM into an exit
too), the box SIGKILLs whatever still runs in its cells and removes every cgroup it created; a run killed with
SIGKILL leaves its directories, which the next box removes once their creator is gone and they are empty.

What a box records per cell, between two ``time.monotonic()`` instants (:meth:`ClusterBox.usage`, from samples
every 0.1 s): CPU used (s and cores), its quota, CFS periods and throttled periods, throttled time, run-queue
wait (the second field of ``/proc/<tid>/schedstat`` summed over every thread the cell ever had: time runnable
but not running), peak memory (the cgroup's high-water mark, page cache of the files it wrote included) and the
largest sampled anonymous memory (its own data); and the whole
machine's busy CPU (``/proc/stat``).

STARVATION. A quota caps; it does not guarantee. When the others on the machine take the CPU a quota promised,
the box measures the machine, not the quotas, and :func:`starvation` refuses the window. Two facts, measured
on this kernel (6.18), shape the criterion:

- the kernel counts a thread waiting for its *throttled* cgroup as run-queue wait, the same as one waiting for
  another task's CPU (a busy loop at 0.25 core alone: 0.75 s of wait per second), and adds the wait when the
  thread next runs, often in the next period; so wait means contention only in an interval with no throttled
  period in it or in the interval before;
- TensorFlow processes are dozens of threads with short runs (the PS ~800 wake-ups a second per compute
  thread, 0.1 ms each), and on two cores 1.5-2 cores busy each wake-up waits ~0.2-1.5 ms for a CPU whoever
  keeps them busy: a chief using 0.01-0.04 core waited 0.1-0.6 thread-seconds per second. Counted as
  starvation (the first version of this criterion did), every window on a busy machine was refused, whether
  or not anyone took CPU a quota had promised.

So an interval is *contended* for a cell when (1) its quota did not bind (no throttled period in the interval
or the one before) and (2) the machine was over-committed around it: its busy CPU time plus the quota the
box's cells left unused reached 97 % of its CPU time over 0.5 s (the others took CPU a quota had promised; on
a machine with room, a runnable thread waits for a wake-up, not for CPU). Over its contended intervals a cell
was *denied* min(quota headroom, run-queue wait) CPU-seconds (for a latency-bound process such as the chief an
upper bound: its waits delay it without all becoming CPU it would have used). A window is refused when any
cell was denied more than 5 % of its quota x the window (``MAX_DENIED_SHARE``): :class:`Starved` / the
verdict lines name the process and the figures.

Measured with ``python benchmarks/cluster_box.py --json FILE`` (Python busy loops, 6 s each after 1 s; the
"outside" processes are in no cgroup, each thread hashing with the GIL released). Quiet: 2026-12-06 02:05,
nothing else running (``results/cluster_box_calibration.json``); loaded: 00:06, another engineer's
``ps_sharding_bench`` vocabulary sweep beside it, load average 6.2 (``results/cluster_box_calibration_loaded.json``).

=================================  =====  ===========================  ===============  =================
scenario                           quota  used, cores: quiet / loaded   denied           verdict
=================================  =====  ===========================  ===============  =================
one loop alone                     0.25   0.250 / 0.250                0 / 0 %          ok / ok
4 loops (sum 1.2 cores)            0.3    0.300 / 0.288-0.291          0 / 1.7-2.2 %    ok / ok
8 loops (sum 4.0 of 2 cores)       0.5    0.239-0.246 / 0.148-0.158    51-52 / 68-70 %  starved / starved
3 loops + 12 processes outside     0.3    0.300-0.301 / 0.217-0.227    0 / 24-28 %      ok / starved
3 loops + 4 x 4 threads outside    0.3    0.298-0.302 / 0.255-0.256    0-0.4 / 14-15 %  ok / starved
=================================  =====  ===========================  ===============  =================

For a CPU-bound loop the denied share is its shortfall from the quota (52 % denied at 48 % used; 28 % at
72 %). The threshold: an earlier loaded run of the last scenario gave 0.279 / 0.292 / 0.293 cores, denied 7.1 /
3.0 / 2.9 %: 5 % refuses the loop that got 93 % of its quota and keeps those that got 97 %. A quota binding
(throttled in every period) is never starvation, whatever the wait (0.70-0.76 s per second above). Outside
busy loops alone did not starve a boxed loop on the quiet machine (CFS gives a group that was throttled its
due when it returns); with the other engineer's TensorFlow on top they did. On TensorFlow (``scaling_bench``,
quotas summing to 0.75-1.5 cores): in the full run on a quiet machine (others 0.08-0.13 core) all 18 windows
were accepted, the largest denied share 2.9 % (a worker at 4 workers); while the other engineer's tests ran
(others 0.5-1.3 cores) windows were refused with the PS denied 12-59 % and workers 6-56 % of their quotas, and
the rates they measured were lower (e.g. 4 workers 54.5 steps/s refused, 62.3-65.4 accepted).

Overhead (``scaling_bench.py --parts overhead``, the mlp at 1 PS and 1 worker, 3 alternating windows each,
2026-12-06): every process in a cell with no CPU quota 83.8 steps/s against 83.7 with no cgroup (1.002); the
cgroups, the wrapper and the sampler cost nothing measurable. At a whole core each, 66.9 (0.800): the quota
caps the worker, whose two TensorFlow threads use 1.2 cores without it. The sampler thread itself (it runs in
the caller, outside the box, so it counts among "the others") used 0.02-0.06 core for 3-7 TensorFlow
processes: ~35 small files per cell every 0.1 s with one ``os.read`` each, ``memory.stat`` every 0.5 s.

Not done: delay and bandwidth between processes (network namespaces with ``tc netem``/``tbf`` per process,
veth pairs to a bridge in ``hack/netns-run``'s namespace). Every process talks over loopback, so the curves
have no network cost; they are an upper bound on what the same quotas give across machines.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import re
import shlex
import signal
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PARENT = "tfps-bench"
"""Every cgroup this module creates lives under ``<hierarchy>/<the caller's own cgroup>/tfps-bench/<run-id>/``."""
PERIOD_US = 100_000
"""CFS bandwidth period of every quota (the kernel's and Kubernetes' default)."""
NICE0_SHARES = 1024
"""cgroup v1 ``cpu.shares`` of one nice-0 task; v2's ``cpu.weight`` equivalent is 100."""
V1_CONTROLLERS = ("cpu", "cpuacct", "memory")
V2_CONTROLLERS = ("cpu", "memory")
V1_UNLIMITED = 1 << 62
"""v1 writes 'no limit' as PAGE_COUNTER_MAX pages in bytes (9223372036854771712); anything above this is none."""


# ---- pure parts: file formats ---------------------------------------------------------------------------


def parse_keyed(text: str) -> dict[str, int]:
    """A flat-keyed cgroup file (``cpu.stat``, ``memory.stat``): ``key value`` lines -> ints."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
            out[parts[0]] = int(parts[1])
    return out


@dataclass(frozen=True)
class CpuStat:
    """Cumulative CPU bandwidth counters of one cgroup, in one unit whatever the cgroup version."""

    usage_ns: int | None
    """CPU used by the cgroup (v2 ``usage_usec``; v1 keeps it in ``cpuacct.usage``, so None here)."""
    periods: int
    throttled_periods: int
    throttled_ns: int


def parse_v1_cpu_stat(text: str) -> CpuStat:
    """cgroup v1 ``cpu.stat``: ``nr_periods``, ``nr_throttled``, ``throttled_time`` (ns)."""
    kv = parse_keyed(text)
    return CpuStat(None, kv.get("nr_periods", 0), kv.get("nr_throttled", 0), kv.get("throttled_time", 0))


def parse_v2_cpu_stat(text: str) -> CpuStat:
    """cgroup v2 ``cpu.stat``: ``usage_usec``, ``nr_periods``, ``nr_throttled``, ``throttled_usec``."""
    kv = parse_keyed(text)
    return CpuStat(
        kv.get("usage_usec", 0) * 1000,
        kv.get("nr_periods", 0),
        kv.get("nr_throttled", 0),
        kv.get("throttled_usec", 0) * 1000,
    )


def parse_v2_cpu_max(text: str) -> tuple[float | None, int]:
    """cgroup v2 ``cpu.max`` (``"30000 100000"`` or ``"max 100000"``) -> (cores or None, period in µs)."""
    quota, _, period = text.strip().partition(" ")
    period_us = int(period or PERIOD_US)
    return (None if quota == "max" else int(quota) / period_us), period_us


def parse_v1_quota(quota_us: str, period_us: str) -> float | None:
    """cgroup v1 ``cpu.cfs_quota_us`` (-1: none) and ``cpu.cfs_period_us`` -> cores or None."""
    q = int(quota_us.strip())
    return None if q < 0 else q / int(period_us.strip())


def parse_memory_bytes(text: str) -> int | None:
    """A memory limit: v2 ``max`` or v1's PAGE_COUNTER_MAX mean none."""
    t = text.strip()
    if t == "max":
        return None
    n = int(t)
    return None if n >= V1_UNLIMITED else n


def quota_us(cores: float, period_us: int = PERIOD_US) -> int:
    """The runtime per period that caps a cgroup at ``cores`` (the kernel refuses less than 1 ms)."""
    q = round(cores * period_us)
    if q < 1000:
        raise ValueError(f"a quota of {cores} cores is under the kernel's 1 ms per {period_us} µs period")
    return q


@dataclass(frozen=True)
class Limits:
    """What one process may use: ``cores`` of CPU bandwidth (None: no quota) and ``memory_bytes`` (None: no limit)."""

    cores: float | None
    memory_bytes: int | None = None


def v1_limit_files(limits: Limits, period_us: int = PERIOD_US) -> dict[str, dict[str, str]]:
    """controller -> {file: content} that sets ``limits`` on a v1 cgroup (written in this order)."""
    cpu = {"cpu.cfs_period_us": str(period_us)}
    cpu["cpu.cfs_quota_us"] = "-1" if limits.cores is None else str(quota_us(limits.cores, period_us))
    memory = {} if limits.memory_bytes is None else {"memory.limit_in_bytes": str(limits.memory_bytes)}
    return {"cpu": cpu, "memory": memory}


def v2_limit_files(limits: Limits, period_us: int = PERIOD_US) -> dict[str, str]:
    """{file: content} that sets ``limits`` on a v2 cgroup."""
    quota = "max" if limits.cores is None else str(quota_us(limits.cores, period_us))
    out = {"cpu.max": f"{quota} {period_us}"}
    if limits.memory_bytes is not None:
        out["memory.max"] = str(limits.memory_bytes)
        out["memory.swap.max"] = "0"
    return out


def parse_schedstat(text: str) -> tuple[int, int]:
    """``/proc/<pid>/task/<tid>/schedstat`` -> (ns on a CPU, ns runnable but waiting on a run queue)."""
    run, wait, *_ = text.split()
    return int(run), int(wait)


def parse_proc_stat_cpu(text: str) -> tuple[int, int]:
    """``/proc/stat``'s first line -> (busy, idle) in clock ticks over all CPUs (iowait counts as idle)."""
    fields = [int(x) for x in text.splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest and guest_nice (fields 8, 9) are already inside user and nice
    return sum(fields[:8]) - idle, idle


@dataclass(frozen=True)
class Mount:
    mountpoint: Path
    root: str
    """The hierarchy's path mounted there (``/`` unless a cgroup namespace or a bind mount shows part of it)."""
    fstype: str
    options: frozenset[str]


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as an octal escape (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts of a ``/proc/self/mountinfo``."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        f, r = left.split(), right.split()
        if r[0] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(r[2].split(",") if len(r) > 2 else ())
        out.append(Mount(Path(_unescape(f[4])), _unescape(f[3]), r[0], options))
    return out


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` -> {controller (or '' for v2's unified line): path}."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            out[controller] = parts[2]
    return out


@dataclass(frozen=True)
class Layout:
    """Where this process's cgroups are: v1, one directory per controller (cpu and cpuacct may share one),
    or v2, one directory for all. Each is the caller's own cgroup in that hierarchy."""

    version: int
    dirs: Mapping[str, Path]
    """controller -> the caller's own cgroup directory (v2: the key ``""``)."""

    @property
    def hierarchies(self) -> list[Path]:
        return list(dict.fromkeys(self.dirs.values()))


class CgroupUnavailable(RuntimeError):
    """No writable cgroup hierarchy with the controllers a box needs."""


def _own_dir(mount: Mount, own: str) -> Path:
    rel = os.path.relpath(own, mount.root) if mount.root != "/" else own.lstrip("/")
    if rel.startswith(".."):
        raise CgroupUnavailable(f"this process's cgroup {own} is outside the mount at {mount.mountpoint}")
    return mount.mountpoint / rel if rel not in ("", ".") else mount.mountpoint


def detect_layout(mountinfo: str, proc_cgroup: str, v2_controllers: Mapping[Path, str]) -> Layout:
    """Pick v2 when a cgroup2 mount offers both ``cpu`` and ``memory`` (``v2_controllers``: mountpoint ->
    its ``cgroup.controllers``), else v1 when the ``cpu``, ``cpuacct`` and ``memory`` hierarchies are mounted
    (a hybrid host with a controller-less ``unified`` mount is v1). Raise :class:`CgroupUnavailable` otherwise."""
    mounts = parse_mountinfo(mountinfo)
    own = parse_proc_cgroup(proc_cgroup)
    for m in mounts:
        if m.fstype == "cgroup2" and set(V2_CONTROLLERS) <= set(v2_controllers.get(m.mountpoint, "").split()):
            return Layout(2, {"": _own_dir(m, own.get("", "/"))})
    dirs: dict[str, Path] = {}
    for m in mounts:
        if m.fstype != "cgroup":
            continue
        for c in V1_CONTROLLERS:
            if c in m.options and c not in dirs:
                dirs[c] = _own_dir(m, own.get(c, "/"))
    missing = [c for c in V1_CONTROLLERS if c not in dirs]
    if missing:
        raise CgroupUnavailable(f"no cgroup v2 mount with cpu and memory, and no v1 hierarchy for {missing}")
    return Layout(1, dirs)


# ---- pure parts: what a window of samples says -----------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """Cumulative counters of one cell at one instant (``t``: ``time.monotonic()``, shared by all processes)."""

    t: float
    cpu_ns: int
    periods: int
    throttled_periods: int
    throttled_ns: int
    wait_ns: int
    """Run-queue delay summed over every thread ever seen in the cell (``schedstat``'s second field)."""
    memory_bytes: int
    peak_memory_bytes: int
    anon_bytes: int = 0
    """Anonymous memory (v1 ``memory.stat`` ``total_rss``, v2 ``anon``): the usage without the page cache."""


@dataclass(frozen=True)
class Usage:
    """What one cell used over a window."""

    name: str
    limits: Limits
    seconds: float
    cpu_seconds: float
    periods: int
    throttled_periods: int
    throttled_seconds: float
    wait_seconds: float
    """Time its threads were runnable but not running (throttled time included: the kernel counts both)."""
    peak_memory_bytes: int
    """The cgroup's high-water mark since it was created (v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``)."""
    max_sampled_memory_bytes: int
    max_sampled_anon_bytes: int
    """The most anonymous memory sampled: the process's own data, not the files it wrote (page cache, which the
    cgroup's peak counts too: a PS writing its checkpoint shard is charged for it)."""
    contended_seconds: float
    """Time in sample intervals when the machine was over-committed and the cell's quota did not bind (no throttled
    period in the interval or the one before): see :func:`denied_cpu`."""
    denied_cpu_seconds: float
    """CPU the quota allowed and the cell's threads waited for in the contended intervals, but did not get."""

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def quota_share(self) -> float | None:
        """Cores used over the quota (1.0: it used its whole quota), or None without one."""
        return None if not self.limits.cores else self.cores / self.limits.cores

    @property
    def denied_share(self) -> float | None:
        """Denied CPU over what the quota allowed over the whole window (None without a quota)."""
        if not self.limits.cores or self.seconds <= 0:
            return None
        return self.denied_cpu_seconds / (self.limits.cores * self.seconds)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "quota_cores": self.limits.cores,
            "memory_limit_bytes": self.limits.memory_bytes,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "cores": self.cores,
            "quota_share": self.quota_share,
            "periods": self.periods,
            "throttled_periods": self.throttled_periods,
            "throttled_seconds": self.throttled_seconds,
            "run_queue_wait_seconds": self.wait_seconds,
            "contended_seconds": self.contended_seconds,
            "denied_cpu_seconds": self.denied_cpu_seconds,
            "denied_share": self.denied_share,
            "peak_memory_bytes": self.peak_memory_bytes,
            "max_sampled_memory_bytes": self.max_sampled_memory_bytes,
            "max_sampled_anon_bytes": self.max_sampled_anon_bytes,
        }


def window(times: Sequence[float], t0: float, t1: float) -> tuple[int, int]:
    """Indices (first, last) of the samples that enclose [t0, t1]: the last at or before t0, the first at or
    after t1."""
    if not times or times[0] > t0 or times[-1] < t1:
        span = f"{times[0]}-{times[-1]}" if times else "none"
        raise ValueError(f"samples ({span}) do not cover the window {t0}-{t1}")
    first = max(i for i, t in enumerate(times) if t <= t0)
    last = min(i for i, t in enumerate(times) if t >= t1)
    return first, last


@dataclass(frozen=True)
class MachineSample:
    """The whole machine's CPU time at one instant (``/proc/stat``, in clock ticks over all CPUs)."""

    t: float
    busy_ticks: int
    idle_ticks: int


OVERCOMMITTED = 0.97
"""The machine counts as over-committed around an interval when its busy CPU time plus the quota the box's
processes left unused reached this share of its CPU time (see STARVATION)."""
SPAN = 0.5
"""Seconds over which that is taken around each interval (``/proc/stat`` counts 10 ms ticks)."""


def unused_quota(cores: float | None, samples: Sequence[Sample]) -> list[float]:
    """CPU seconds one cell's quota allowed but the cell did not use, per interval between its samples."""
    if not cores:
        return [0.0] * (len(samples) - 1)
    return [max(0.0, cores * (b.t - a.t) - (b.cpu_ns - a.cpu_ns) / 1e9) for a, b in zip(samples, samples[1:])]


def overcommitted_intervals(
    machine: Sequence[MachineSample],
    unused: Sequence[float],
    hz: int,
    threshold: float = OVERCOMMITTED,
    span: float = SPAN,
) -> list[bool]:
    """For each interval between consecutive machine samples, whether the machine was over-committed over the
    stretch of at least ``span`` seconds centred on it: its busy time plus ``unused`` (the box's unused quota,
    seconds per interval) reached ``threshold`` of its CPU time (busy + idle; ticks of ``hz`` per second).
    Then the others' CPU and the box's quotas together did not fit the machine: a quota was not available."""
    times = [m.t for m in machine]
    out = []
    for i in range(len(machine) - 1):
        centre = (times[i] + times[i + 1]) / 2
        lo = max(0, min(i, bisect.bisect_right(times, centre - span / 2) - 1))
        hi = min(len(times) - 1, max(i + 1, bisect.bisect_left(times, centre + span / 2)))
        busy = (machine[hi].busy_ticks - machine[lo].busy_ticks) / hz
        total = busy + (machine[hi].idle_ticks - machine[lo].idle_ticks) / hz
        out.append(total > 0 and busy + sum(unused[lo:hi]) >= threshold * total)
    return out


def denied_cpu(cores: float | None, samples: Sequence[Sample], overcommitted: Sequence[bool]) -> tuple[float, float]:
    """(contended seconds, denied CPU seconds) of one cell over consecutive samples; ``overcommitted[i]`` says
    whether the machine was over-committed between samples i and i+1.

    The kernel counts a thread that waits for its throttled cgroup as waiting on a run queue, just like one
    that waits for another task's CPU, and adds the wait when the thread runs again (often in the next
    period), so the two cannot be told apart within one interval. An interval is *contended* when neither it
    nor the interval before it saw a throttled period (its wait is not the quota's) and the machine was
    over-committed (otherwise every quota fitted, and a wait was a wake-up's latency among the box's own
    processes, the same in every run, not CPU the quota promised and others took). Over the contended
    intervals the cell was denied min(headroom, wait): the CPU its quota still allowed (``cores`` x time -
    CPU used), as far as its threads were waiting to run. Without a quota nothing is denied by this measure."""
    contended = headroom = wait = 0.0
    for i in range(len(samples) - 1):
        prev, a, b = samples[i - 1] if i else None, samples[i], samples[i + 1]
        throttled = b.throttled_periods > a.throttled_periods or (
            prev is not None and a.throttled_periods > prev.throttled_periods
        )
        if throttled or not overcommitted[i]:
            continue
        dt = b.t - a.t
        contended += dt
        if cores:
            headroom += max(0.0, cores * dt - (b.cpu_ns - a.cpu_ns) / 1e9)
        wait += (b.wait_ns - a.wait_ns) / 1e9
    return contended, (min(headroom, wait) if cores else 0.0)


def usage_of(name: str, limits: Limits, samples: Sequence[Sample], overcommitted: Sequence[bool]) -> Usage:
    """What a cell used between its first and last sample (``overcommitted``: one flag per interval)."""
    a, b = samples[0], samples[-1]
    contended, denied = denied_cpu(limits.cores, samples, overcommitted)
    return Usage(
        name=name,
        limits=limits,
        seconds=b.t - a.t,
        cpu_seconds=(b.cpu_ns - a.cpu_ns) / 1e9,
        periods=b.periods - a.periods,
        throttled_periods=b.throttled_periods - a.throttled_periods,
        throttled_seconds=(b.throttled_ns - a.throttled_ns) / 1e9,
        wait_seconds=(b.wait_ns - a.wait_ns) / 1e9,
        peak_memory_bytes=b.peak_memory_bytes,
        max_sampled_memory_bytes=max(s.memory_bytes for s in samples),
        max_sampled_anon_bytes=max(s.anon_bytes for s in samples),
        contended_seconds=contended,
        denied_cpu_seconds=denied,
    )


# ---- I/O: the cgroups of one run ------------------------------------------------------------------------


def _read(path: Path) -> str:
    return path.read_text()


def _fast_read(path: str | Path, size: int = 4096) -> str:
    """The start of a small kernel file (one read, no buffering): the sampler reads hundreds a second."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size).decode()
    finally:
        os.close(fd)


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def current_layout() -> Layout:
    """The cgroup layout of this machine as this process sees it."""
    mountinfo = _read(Path("/proc/self/mountinfo"))
    controllers = {}
    for m in parse_mountinfo(mountinfo):
        if m.fstype == "cgroup2":
            with contextlib.suppress(OSError):
                controllers[m.mountpoint] = _read(m.mountpoint / "cgroup.controllers")
    layout = detect_layout(mountinfo, _read(Path("/proc/self/cgroup")), controllers)
    override = os.environ.get("TFPS_BENCH_CGROUP_PARENT")
    if override and layout.version == 2:
        layout = Layout(2, {"": Path(override)})
    return layout


def unavailable_reason() -> str | None:
    """Why a box cannot be made here (no cgroups with the controllers, not writable), or None."""
    try:
        layout = current_layout()
    except (CgroupUnavailable, OSError) as e:
        return str(e)
    for d in layout.hierarchies:
        if not os.access(d, os.W_OK):
            return f"{d} is not writable by uid {os.getuid()} (creating cgroups needs root or a delegated cgroup)"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rmdir(path: Path, attempts: int = 50) -> None:
    """rmdir a cgroup, waiting briefly for exited tasks to leave it (EBUSY)."""
    for i in range(attempts):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY or i == attempts - 1:
                raise
            time.sleep(0.1)


def _pids(cell_dir: Path) -> list[int]:
    try:
        return [int(x) for x in _read(cell_dir / "cgroup.procs").split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


class Starved(RuntimeError):
    """A process of the box got less CPU than its quota while it had work waiting: the run measured the machine's
    contention, not the quotas. Its message names the processes and the figures."""

    def __init__(self, verdicts: Sequence[str]) -> None:
        super().__init__("starved below quota: " + "; ".join(verdicts))
        self.verdicts = list(verdicts)


@dataclass
class _Cell:
    name: str
    limits: Limits
    dirs: dict[str, Path]
    """controller -> this cell's directory (v2: key '')."""
    samples: list[Sample] = field(default_factory=list)
    threads: dict[int, int] = field(default_factory=dict)
    """tid -> its last run-queue delay (ns): a thread that exits keeps what it had waited."""


class ClusterBox:
    """The cgroups of one run: ``<own cgroup>/tfps-bench/<run-id>/<name>`` for each name of ``limits``.

    ``with ClusterBox({"ps-0": Limits(0.3, 2 << 30), ...}) as box:`` creates them (and removes any left by a
    run whose process is gone), starts a sampler thread, and on exit, also on an exception or Ctrl-C, kills
    whatever still runs in them and removes them. :meth:`command` wraps an argv so that the process enters its
    cell before it execs; :meth:`usage` says what each cell used between two ``time.monotonic()`` instants.
    """

    def __init__(
        self,
        limits: Mapping[str, Limits],
        *,
        layout: Layout | None = None,
        interval: float = 0.1,
        run_id: str | None = None,
    ) -> None:
        for name in limits:
            if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name):
                raise ValueError(f"cell name {name!r}: lowercase letters, digits, '-', '_' and '.' only")
        self.layout = layout or current_layout()
        self.run_id = run_id or f"{os.getpid()}-{time.time_ns() % 10**12}"
        self.interval = interval
        self.cells = {
            name: _Cell(name, lim, {c: d / PARENT / self.run_id / name for c, d in self.layout.dirs.items()})
            for name, lim in limits.items()
        }
        self.machine: list[MachineSample] = []
        """The whole machine at each sample (index-aligned with every cell's samples)."""
        self.sampler_cpu_seconds = 0.0
        self._sampler_started = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._created: list[Path] = []

    # -- set-up and clean-up

    def _parents(self) -> list[Path]:
        return [d / PARENT for d in self.layout.hierarchies]

    def _run_dirs(self) -> list[Path]:
        return [p / self.run_id for p in self._parents()]

    def _mkdir(self, path: Path) -> None:
        try:
            path.mkdir()
        except FileExistsError:
            return
        self._created.append(path)

    def remove_stale(self) -> list[Path]:
        """Remove run directories under our parent whose creating process is gone (a run killed with SIGKILL);
        any process still inside is left alone and its directory kept. Returns what was removed."""
        removed = []
        for parent in self._parents():
            if not parent.is_dir():
                continue
            for run in parent.iterdir():
                m = re.fullmatch(r"(\d+)-\d+", run.name)
                if not run.is_dir() or m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
                    continue
                cells = [c for c in run.iterdir() if c.is_dir()]
                if any(_pids(c) for c in cells + [run]):
                    continue
                for c in cells:
                    _rmdir(c, attempts=1)
                _rmdir(run, attempts=1)
                removed.append(run)
        return removed

    def _enable_v2(self, path: Path) -> None:
        try:
            _write(path / "cgroup.subtree_control", " ".join(f"+{c}" for c in V2_CONTROLLERS))
        except OSError as e:
            raise CgroupUnavailable(
                f"cannot enable {'/'.join(V2_CONTROLLERS)} for the children of {path} ({e.strerror}): cgroup v2 "
                "lets no cgroup that holds processes delegate controllers; set TFPS_BENCH_CGROUP_PARENT to a "
                "cgroup delegated to you with an empty cgroup.procs"
            ) from e

    def create(self) -> None:
        self.remove_stale()
        n = len(self.cells)
        if self.layout.version == 2:
            (own,) = self.layout.hierarchies
            self._enable_v2(own)
            for d in (own / PARENT, own / PARENT / self.run_id):
                self._mkdir(d)
                self._enable_v2(d)
            _write(own / PARENT / self.run_id / "cpu.weight", str(min(10_000, 100 * n)))
        else:
            for parent in self._parents():
                self._mkdir(parent)
                self._mkdir(parent / self.run_id)
            # Weigh the run as its processes would weigh as nice-0 tasks outside any cgroup: a group's weight
            # is one task's however many it holds, and the machine's other tasks would otherwise win.
            cpu = self.layout.dirs["cpu"] / PARENT
            shares = NICE0_SHARES * n
            if int(_read(cpu / "cpu.shares")) < shares:
                _write(cpu / "cpu.shares", str(shares))
            _write(cpu / self.run_id / "cpu.shares", str(shares))
        for cell in self.cells.values():
            for d in dict.fromkeys(cell.dirs.values()):
                self._mkdir(d)
            self._apply(cell)

    def _apply(self, cell: _Cell) -> None:
        if self.layout.version == 2:
            for name, text in v2_limit_files(cell.limits).items():
                with contextlib.suppress(FileNotFoundError):  # memory.swap.max: only with swap accounting
                    _write(cell.dirs[""] / name, text)
            return
        for controller, files in v1_limit_files(cell.limits).items():
            for name, text in files.items():
                _write(cell.dirs[controller] / name, text)
        memsw = cell.dirs["memory"] / "memory.memsw.limit_in_bytes"
        if cell.limits.memory_bytes is not None and memsw.exists():
            _write(memsw, str(cell.limits.memory_bytes))  # no swapping past the limit either

    def kill_all(self) -> None:
        """SIGKILL every process still in a cell (only ever the processes this box's commands started)."""
        for _ in range(20):
            pids = {p for cell in self.cells.values() for d in cell.dirs.values() for p in _pids(d)}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def remove(self) -> None:
        """Remove every cgroup this box created, children first (the shared parent only once it is empty)."""
        errors = []
        for path in reversed(self._created):
            try:
                _rmdir(path, attempts=1 if path.name == PARENT else 50)
            except OSError as e:
                if not (path.name == PARENT and e.errno in (errno.EBUSY, errno.ENOTEMPTY)):
                    errors.append(f"{path}: {e}")
        self._created.clear()
        if errors:
            raise RuntimeError("could not remove cgroups: " + "; ".join(errors))

    def __enter__(self) -> ClusterBox:
        try:
            self.create()
        except BaseException:
            self.remove()
            raise
        self._thread = threading.Thread(target=self._sample_loop, name="cluster-box-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            self.kill_all()
        finally:
            self.remove()

    # -- processes

    def command(self, name: str, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped so that the process writes its pid into its cell's ``cgroup.procs`` (each hierarchy)
        and then execs: nothing of it runs, nor allocates memory, outside its cell."""
        cell = self.cells[name]
        writes = " && ".join(
            f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in dict.fromkeys(cell.dirs.values())
        )
        return ["/bin/sh", "-c", f'{writes} && exec "$@"', f"tfps-box-{name}", *argv]

    # -- sampling

    ANON_EVERY = 5
    """``memory.stat`` is ~40 lines: read it every 5th sample (0.5 s), keep the last figure in between."""

    def _anon(self, cell: _Cell, path: Path, key: str) -> int:
        if cell.samples and len(cell.samples) % self.ANON_EVERY:
            return cell.samples[-1].anon_bytes
        return parse_keyed(_fast_read(path, 65536)).get(key, 0)

    def _sample_cell(self, cell: _Cell, t: float) -> Sample:
        if self.layout.version == 2:
            d = cell.dirs[""]
            st = parse_v2_cpu_stat(_fast_read(d / "cpu.stat"))
            cpu_ns = st.usage_ns or 0
            mem = int(_fast_read(d / "memory.current"))
            try:
                peak = int(_fast_read(d / "memory.peak"))
            except FileNotFoundError:  # before Linux 5.19
                peak = max([mem] + [s.peak_memory_bytes for s in cell.samples[-1:]])
            anon = self._anon(cell, d / "memory.stat", "anon")
            threads = d / "cgroup.threads"
        else:
            st = parse_v1_cpu_stat(_fast_read(cell.dirs["cpu"] / "cpu.stat"))
            cpu_ns = int(_fast_read(cell.dirs["cpuacct"] / "cpuacct.usage"))
            mem = int(_fast_read(cell.dirs["memory"] / "memory.usage_in_bytes"))
            peak = int(_fast_read(cell.dirs["memory"] / "memory.max_usage_in_bytes"))
            anon = self._anon(cell, cell.dirs["memory"] / "memory.stat", "total_rss")
            threads = cell.dirs["cpu"] / "tasks"
        for tid in _fast_read(threads, 1 << 20).split():
            try:
                _, wait = parse_schedstat(_fast_read(f"/proc/{tid}/schedstat"))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                continue  # exited since: it keeps the wait last seen
            cell.threads[int(tid)] = wait
        return Sample(
            t, cpu_ns, st.periods, st.throttled_periods, st.throttled_ns, sum(cell.threads.values()), mem, peak, anon
        )

    def sample(self) -> None:
        """Take one sample of every cell and of the machine (the sampler thread calls this every ``interval``)."""
        t = time.monotonic()
        busy, idle = parse_proc_stat_cpu(_fast_read("/proc/stat", 256))
        taken = [(cell, self._sample_cell(cell, t)) for cell in self.cells.values()]
        with self._lock:
            self.machine.append(MachineSample(t, busy, idle))
            for cell, sample in taken:
                cell.samples.append(sample)

    def sampler_cores(self) -> float:
        """CPU the sampler thread has used per second since it started."""
        elapsed = time.monotonic() - self._sampler_started
        return self.sampler_cpu_seconds / elapsed if elapsed > 0 else 0.0

    def _sample_loop(self) -> None:
        c0 = time.thread_time()
        next_t = self._sampler_started = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample()
            except OSError:
                if self._stop.is_set():
                    break
                raise
            self.sampler_cpu_seconds = time.thread_time() - c0
            next_t += self.interval
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def wait_for_sample_after(self, t: float, timeout: float = 5) -> None:
        """Block until a sample taken at or after ``t`` exists (so that a window ending at ``t`` is covered)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.machine and self.machine[-1].t >= t:
                    return
            time.sleep(self.interval / 4)
        raise TimeoutError(f"no sample after {t} within {timeout}s")

    # -- results

    def samples(self, name: str) -> list[Sample]:
        with self._lock:
            return list(self.cells[name].samples)

    def usage(self, t0: float, t1: float) -> dict[str, Usage]:
        """What each cell used between ``t0`` and ``t1`` (``time.monotonic()``; widened to the enclosing samples)."""
        self.wait_for_sample_after(t1)
        with self._lock:
            machine = list(self.machine)
            samples = {name: list(cell.samples) for name, cell in self.cells.items()}
        first, last = window([m.t for m in machine], t0, t1)
        per_cell = [unused_quota(self.cells[name].limits.cores, s) for name, s in samples.items()]
        unused = [sum(u) for u in zip(*per_cell)]
        over = overcommitted_intervals(machine, unused, os.sysconf("SC_CLK_TCK"))[first:last]
        return {name: usage_of(name, self.cells[name].limits, s[first : last + 1], over) for name, s in samples.items()}

    def machine_cores(self, t0: float, t1: float) -> float:
        """CPU cores the whole machine was busy on average between t0 and t1 (every process, ours included)."""
        with self._lock:
            m = list(self.machine)
        first, last = window([x.t for x in m], t0, t1)
        return (m[last].busy_ticks - m[first].busy_ticks) / os.sysconf("SC_CLK_TCK") / (m[last].t - m[first].t)


MAX_DENIED_SHARE = 0.05
"""Refuse a window in which a process was denied more than this share of its quota (see the module docstring)."""


def starvation(usages: Iterable[Usage], max_denied: float = MAX_DENIED_SHARE) -> list[str]:
    """One line per process denied more than ``max_denied`` of its quota, naming it and the figures."""
    out = []
    for u in usages:
        share = u.denied_share
        if share is None or share <= max_denied:
            continue
        out.append(
            f"{u.name} was denied {share:.0%} of its {u.limits.cores:g}-core quota (limit {max_denied:.0%}): "
            f"{u.denied_cpu_seconds:.2f} CPU-s it waited for in {u.contended_seconds:.1f} s of {u.seconds:.1f} s "
            f"when the machine was over-committed and its quota did not bind; it used {u.cores:.3f} cores, its "
            f"threads waited {u.wait_seconds:.1f} s on run queues, throttled in {u.throttled_periods} of "
            f"{u.periods} periods"
        )
    return out


def check(usages: Iterable[Usage], max_denied: float = MAX_DENIED_SHARE) -> None:
    """Raise :class:`Starved` if any process was denied more than ``max_denied`` of its quota."""
    verdicts = starvation(usages, max_denied)
    if verdicts:
        raise Starved(verdicts)


# ---- calibration: `python benchmarks/cluster_box.py` ----------------------------------------------------

BUSY_LOOP = "while True: pass"
HASH_THREADS = (
    "import hashlib, threading\nb = bytes(1 << 20)\n"
    "def spin():\n    while True: hashlib.sha256(b).digest()\n"
    "for _ in range({n}): threading.Thread(target=spin).start()"
)
"""A process of ``n`` threads that each keep a CPU busy (sha256 releases the GIL)."""
CALIBRATION: dict[str, tuple[list[float], list[int]]] = {
    "one loop at 0.25 core": ([0.25], []),
    "4 loops at 0.3 (sum 1.2)": ([0.3] * 4, []),
    "8 loops at 0.5 (sum 4.0)": ([0.5] * 8, []),
    "3 loops at 0.3 + 12 loops outside": ([0.3] * 3, [1] * 12),
    "3 loops at 0.3 + 4x4 threads outside": ([0.3] * 3, [4] * 4),
}
"""Scenario -> (each boxed busy loop's quota, the threads of each busy process outside any cgroup)."""


def busy_loops(quotas: Sequence[float], outside: Sequence[int], seconds: float) -> tuple[dict[str, Usage], float]:
    """Run one Python busy loop per quota in a box (and a busy process of n threads outside any cgroup for each
    n of ``outside``) for ``seconds`` after a 1 s start; return what each boxed loop used and the machine's
    busy cores."""
    import subprocess
    import sys

    limits = {f"loop-{i}": Limits(q, 256 << 20) for i, q in enumerate(quotas)}
    procs: list[subprocess.Popen[bytes]] = []
    with ClusterBox(limits) as box:
        try:
            procs += [subprocess.Popen(box.command(n, [sys.executable, "-c", BUSY_LOOP])) for n in limits]
            procs += [subprocess.Popen([sys.executable, "-c", HASH_THREADS.format(n=n)]) for n in outside]
            time.sleep(1)
            t0 = time.monotonic()
            time.sleep(seconds)
            t1 = time.monotonic()
            return box.usage(t0, t1), box.machine_cores(t0, t1)
        finally:
            for p in procs:
                p.kill()
                p.wait()


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Calibrate the starvation verdict on Python busy loops.")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--json", help="also write the figures here")
    a = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"no cluster box here: {reason}")
    load = os.getloadavg()
    print(f"cgroup v{current_layout().version}, load average {load[0]:.1f}")
    print(f"{'scenario':<46}{'loop':>8}{'quota':>7}{'used':>7}{'throttled':>11}{'waited/s':>10}{'denied':>8}  verdict")
    out = []
    for scenario, (quotas, outside) in CALIBRATION.items():
        usage, machine = busy_loops(quotas, outside, a.seconds)
        for u in usage.values():
            refused = bool(starvation([u]))
            print(
                f"{scenario:<46}{u.name:>8}{u.limits.cores:>7.2f}{u.cores:>7.3f}"
                f"{f'{u.throttled_periods}/{u.periods}':>11}{u.wait_seconds / u.seconds:>10.2f}"
                f"{u.denied_share or 0:>8.1%}  {'starved' if refused else 'ok'}"
            )
            out.append({"scenario": scenario, "machine_cores": machine, "refused": refused, **u.as_dict()})
            scenario = ""
    if a.json:
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cgroup": current_layout().version,
            "load_average_start": load,
            "load_average": os.getloadavg(),
            "max_denied_share": MAX_DENIED_SHARE,
            "loops": out,
        }
        Path(a.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
