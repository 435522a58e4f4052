"""``tfps tensorboard NAME [NAME...]``: TensorBoard over one or several jobs' event files.

Locally (``--workdir DIR``: the jobs ``tfps run`` ran there; or NAMEs that are directories or ``gs://``
URIs) it runs TensorBoard on this machine. On a cluster it starts a short-lived pod that mounts the jobs'
claims read-only (:func:`~...manifests.tensorboard_pod.tensorboard_pod`), forwards a loopback port to it,
and deletes the pod when the command ends (Ctrl-C); the pod's deadline ends it if the command dies."""

from __future__ import annotations

import argparse
import importlib.util
import json
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...manifests.tensorboard_pod import PORT, logdir_spec, tensorboard_pod
from ..local_layout import DIRECTORIES_RECORD, LOCAL_DIR
from .errors import ClientError, NotFound, WaitTimeout


class InvalidInput(ClientError):
    """NAMEs that cannot be shown together, or a local job that is not there."""

    exit_code = 2


ENVIRONMENT = "data/environment"
"""Answers once TensorBoard serves: the readiness check of the local run and of the printed URL."""
RUNS = "data/runs"
FIRST_LOAD = 30.0


def _local_logdir(job_root: Path) -> str | None:
    """The TensorBoard directory of a job ``tfps run`` ran: the program's own (``spec.model.directories``, as
    ``tfps run`` recorded where it is on this machine), else ``<job root>/tensorboard``."""
    try:
        own = json.loads((job_root / LOCAL_DIR / DIRECTORIES_RECORD).read_text()).get("tensorboard")
    except (OSError, ValueError, AttributeError):
        own = None
    if isinstance(own, str) and Path(own).is_dir():
        return own
    return str(job_root / "tensorboard") if (job_root / "tensorboard").is_dir() else None


def local_dirs(names: list[str], workdir: str | None) -> dict[str, str] | None:
    """``{run name: log directory}`` when the NAMEs are local: with ``workdir``, each job ``tfps run`` ran
    there (``<workdir>/<namespace>/<name>/tensorboard``); else NAMEs that are ``gs://`` URIs or existing
    directories (a job root, or the ``tensorboard/`` directory itself). None when they are cluster jobs."""
    if workdir is not None:
        root = Path(workdir).expanduser()
        out: dict[str, str] = {}
        for name in names:
            found = sorted(d for p in root.glob(f"*/{name}") if (d := _local_logdir(p)) is not None)
            if not found:
                raise InvalidInput(
                    f'job "{name}": no {root}/<namespace>/{name}/tensorboard (has `tfps run` run it there?)'
                )
            if len(found) > 1:
                raise InvalidInput(f'job "{name}": in several namespaces under {root}: {found}')
            out[name] = found[0]
        return out
    local = [n.startswith("gs://") or Path(n).is_dir() for n in names]
    if not any(local):
        return None
    if not all(local):
        raise InvalidInput("NAME: mix of local directories/gs:// URIs and cluster jobs; show them with two commands")
    out = {}
    for n in names:
        base = n.rstrip("/")
        if n.startswith("gs://"):  # a job's root (<uri>/<namespace>/<job>) or its tensorboard/ itself
            base = base if base.endswith("/tensorboard") else f"{base}/tensorboard"
        elif (Path(base) / "tensorboard").is_dir():
            base = f"{base}/tensorboard"
        label = base.removesuffix("/tensorboard").rsplit("/", 1)[-1] or base
        while label in out:
            label += "_"
        out[label] = base
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_serving(url: str, timeout: float, alive: Any = None) -> None:
    """Until ``url`` + data/environment answers 200, then :func:`first_load`. ``alive()`` False (the
    process ended) stops early."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        if alive is not None and not alive():
            raise ClientError(f"TensorBoard ended before it served {url}")
        try:
            with urllib.request.urlopen(url + ENVIRONMENT, timeout=5) as r:
                if r.status == 200:
                    break
        except OSError as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise WaitTimeout(f"TensorBoard not serving at {url} after {timeout:g}s ({last})", None)
        time.sleep(0.5)
    first_load(url, min(FIRST_LOAD, max(0.0, deadline - time.monotonic())))


def first_load(url: str, seconds: float) -> bool:
    """Whether TensorBoard lists a run within ``seconds``: it loads event files on its own thread after it
    starts serving, and a URL printed before that shows an empty page (a job with no events yet never
    lists one, hence the bound)."""
    end = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url + RUNS, timeout=10) as r:
                if json.load(r):
                    return True
        except (OSError, ValueError):
            pass
        if time.monotonic() > end:
            return False
        time.sleep(0.5)


def run_local(dirs: dict[str, str], port: int, timeout: float) -> int:
    """TensorBoard in a child process on loopback; prints the URL once it serves, runs until Ctrl-C."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ClientError("TensorBoard is not installed here: pip install 'tfps-operator[tensorboard]'")
    port = port or free_port()
    cmd = [sys.executable, "-m", "tensorboard.main", f"--logdir_spec={logdir_spec(dirs)}"]
    cmd += ["--host=127.0.0.1", f"--port={port}"]
    url = f"http://127.0.0.1:{port}/"
    # TensorBoard's own log goes to a file: a pipe nobody reads would fill and block it
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            try:
                wait_serving(url, timeout, alive=lambda: proc.poll() is None)
            except ClientError as e:
                proc.kill()
                proc.wait()
                log.seek(0)
                raise ClientError(f"{e}: {log.read().strip()[-2000:]}") from None
            print(f"TensorBoard at {url} over {', '.join(f'{k}={v}' for k, v in dirs.items())} (Ctrl-C to stop)")
            sys.stdout.flush()
            proc.wait()
            return 0
        except KeyboardInterrupt:
            return 0
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()


@contextmanager
def on_cluster(
    client: Any, names: list[str], namespace: str, image: str | None, lifetime: int, timeout: float, port: int = 0
) -> Iterator[tuple[str, str]]:
    """``(url, pod name)``: the TensorBoard pod created, Ready, and forwarded to ``127.0.0.1:<port>``; the
    pod is deleted when the block ends, whatever happened."""
    from .artifacts import _delete_pod, _image
    from .portforward import PortForward

    jobs = [client.get(n, namespace) for n in names]
    image = image or _image(client, jobs[0])
    pod = f"{names[0]}-tensorboard-{secrets.token_hex(3)}"[:63]
    try:
        body = tensorboard_pod(jobs, pod, image, lifetime)
    except ValueError as e:
        raise InvalidInput(f"tensorboard: {e}") from None
    client._call(f'create TensorBoard pod "{pod}"', client.core.create_namespaced_pod, namespace, body)
    try:
        _wait_ready(client, pod, namespace, timeout)
        with PortForward(client.core, pod, namespace, PORT, port) as pf:
            url = f"http://127.0.0.1:{pf.local_port}/"
            # the pod is Ready (TensorBoard answers on its loopback); wait for its first load through the
            # forward, unless the forward itself fails (then the URL is printed with the reason)
            if not first_load(url, 0) and not pf.errors:
                first_load(url, FIRST_LOAD)
            for why in pf.errors[:1]:
                print(f"port-forward to pod {pod}: {why}", file=sys.stderr)
            yield url, pod
    finally:
        _delete_pod(client, pod, namespace)


def _wait_ready(client: Any, pod: str, ns: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        p = client._call(f'read TensorBoard pod "{pod}"', client.core.read_namespaced_pod, pod, ns)
        if p.status.phase in ("Succeeded", "Failed"):
            raise ClientError(f'TensorBoard pod "{pod}" ended {p.status.phase}: {p.status.message or ""}')
        ready = [c for c in p.status.conditions or [] if c.type == "Ready" and c.status == "True"]
        if p.status.phase == "Running" and ready:
            return
        if time.monotonic() > deadline:
            waiting = [cs.state.waiting for cs in (p.status.container_statuses or []) if cs.state and cs.state.waiting]
            why = f"{waiting[0].reason}: {waiting[0].message}" if waiting else p.status.phase
            raise WaitTimeout(f'TensorBoard pod "{pod}" not Ready after {timeout:g}s ({why})', p.status.phase)
        time.sleep(0.5)


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def main(args: argparse.Namespace, client_of: Any) -> int:
    """SIGTERM ends it like Ctrl-C: the local TensorBoard stopped, the pod deleted. SIGINT is handled
    explicitly too: a process started in the background by a shell without job control inherits SIGINT
    ignored, and Python then raises no KeyboardInterrupt."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    dirs = local_dirs(args.names, args.workdir)
    if dirs is not None:
        return run_local(dirs, args.port, args.timeout)
    client = client_of(args)
    ns = args.namespace or client.namespace
    with on_cluster(client, args.names, ns, args.image, int(args.lifetime), args.timeout, args.port) as (url, pod):
        print(f"TensorBoard at {url} (pod {pod} in {ns}; Ctrl-C to stop and delete it)")
        sys.stdout.flush()
        try:
            while True:
                time.sleep(1)
                st = client._call(f'read TensorBoard pod "{pod}"', client.core.read_namespaced_pod, pod, ns)
                if st.status.phase in ("Succeeded", "Failed"):
                    print(f'TensorBoard pod "{pod}" ended {st.status.phase}: {st.status.message or ""}')
                    return 1
        except KeyboardInterrupt:
            return 0
        except NotFound:
            print(f'TensorBoard pod "{pod}" was deleted')
            return 1
