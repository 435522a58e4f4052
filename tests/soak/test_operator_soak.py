"""Operator crash-consistency soak (CI size): 20 SIGKILLs of the operator at seeded random moments
while jobs run through every lifecycle; then the audit of tests/soak/soak.py. The long variant is
``benchmarks/soak_operator.py`` (same engine, more kills and jobs). Reproduce a run with
``TFPS_SOAK_SEED=<seed>`` (the seed is printed)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from operator_harness import Cluster, OperatorProcess

from .soak import Soak

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def test_operator_sigkilled_20_times_leaves_every_job_correct_and_nothing_orphaned(
    k8s, kubeconfig, make_namespace, wait_until, tmp_path: Path
):
    from support.crd import install_crd

    install_crd(kubeconfig)
    ns = make_namespace(labels=RESTRICTED)  # every pod the operator makes must pass PodSecurity restricted
    kube = Cluster(k8s, ns, wait_until)
    kube.bound_claim("data")
    seed = int(os.environ.get("TFPS_SOAK_SEED", "20261202"))
    ops: list[OperatorProcess] = []

    def new_operator(i: int) -> OperatorProcess:
        op = OperatorProcess(kubeconfig, [ns], tmp_path / f"operator-{i}.log")
        ops.append(op)
        return op.start()

    soak = Soak(
        kube,
        kubeconfig,
        new_operator,
        seed=seed,
        kills=20,
        min_jobs=10,
        in_flight=4,
        kill_gap=(1.0, 5.0),
        downtime=(0.0, 2.0),
        log=lambda m: print(m, flush=True),
    )
    try:
        figures = soak.run()
        problems = soak.audit()
        print("soak figures:", json.dumps(figures.as_dict()))
        assert not problems, "\n".join(problems)
        assert figures.kills >= 20 and figures.jobs >= 10
        assert figures.kills_while_jobs_in_flight >= 15, "most kills must land while jobs are in flight"
        assert figures.actions_while_operator_down >= 1, "pods changed while nobody watched at least once"
    except BaseException as exc:
        # Evidence: every operator's log lines about the jobs the failure names (in order: operator
        # #0, #1, ... ran one after another), in full in a file, the last lines on stderr.
        for name in sorted(set(re.findall(r"\bs\d+-[a-z]+\b", str(exc))))[:6]:
            lines = [f"#{i} {line}" for i, op in enumerate(ops) for line in op.log().splitlines() if name in line]
            (tmp_path / f"evidence-{name}.log").write_text("\n".join(lines) + "\n")
            sys.stderr.write(
                f"\n--- operator log lines naming {name} ({len(lines)}, all in "
                f"{tmp_path / f'evidence-{name}.log'}) ---\n" + "\n".join(lines[-60:]) + "\n"
            )
        sys.stderr.write(
            "\n--- operator lifetimes (how far each got before its kill) ---\n"
            + "\n".join(f"#{i} {_lifetime(op.log())}" for i, op in enumerate(ops))
            + "\n"
        )
        for op in ops[-2:]:
            sys.stderr.write(f"\n--- {op.log_path.name} ---\n{op.log()[-5000:]}\n")
        raise
    finally:
        if soak.recorder._threads[0].is_alive():
            soak.recorder.stop()
        for op in ops:
            op.stop()
        try:
            kube.core.delete_persistent_volume(f"{ns}-data")
        except Exception:
            pass


def _lifetime(log: str) -> str:
    """Started, watching, first and last job loop started, how many, last line: from one operator log."""

    def at(line: str) -> str:
        return line[12:24] if line.startswith("[") else "?"

    lines = log.splitlines()
    if not lines:
        return "no log"
    watch = next((ln for ln in lines if "Starting the watch-stream" in ln), "")
    loops = [ln for ln in lines if "Daemon 'reconcile' is invoked" in ln]
    first = f"first job loop {at(loops[0])}, last {at(loops[-1])}" if loops else "no job loop started"
    return (
        f"up {at(lines[0])}, watching {at(watch) if watch else '-'}, {first}, {len(loops)} job loop(s),"
        f" last line {at(lines[-1])}"
    )
