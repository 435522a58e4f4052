"""Copying a job's export off its volume or out of its object storage: a reader pod mounts the claim
read-only (or gets the chief's storage settings), ``tar`` (or ``python -m tfps_trainer.export.stream``)
streams ``exports/<step>/`` out through the exec API, every file is checked against ``manifest.json``, and
the pod is deleted whatever happened (it also owns a deadline and an owner reference to the job, so a
client killed halfway leaves nothing behind for long)."""

from __future__ import annotations

import io
import json
import secrets
import shutil
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from tfps_wire.export_manifest import digest

from ...manifests.artifact_reader import exports_dir, reader_pod
from .errors import ApiError, ChecksumMismatch, ClientError, NoExports, NotFound, WaitTimeout


class JobsReader(Protocol):
    """What a download needs of :class:`~.jobs.TFPSClient` (which passes itself), so that this module
    imports nothing of it."""

    core: Any
    batch: Any

    def get(self, name: str, namespace: str | None = None) -> Any: ...

    def pods(self, name: str, namespace: str | None = None) -> list[Any]: ...

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any: ...


MANIFEST = "manifest.json"
REPORT = "report.html"
STREAM = ["python", "-m", "tfps_trainer.export.stream"]
"""Reads object storage in the reader pod (the job's image): ``cat URI`` / ``tar PREFIX``."""


def check_export(directory: Path, manifest: dict[str, Any]) -> list[str]:
    """What in ``directory`` (a copy of ``exports/<step>/``) differs from ``manifest``: one line per
    artifact (or file of a directory artifact) whose size or SHA-256 differs, or that is missing."""
    problems = []
    for a in manifest.get("artifacts") or []:
        rel = PurePosixPath(a["path"])
        if rel.is_absolute() or ".." in rel.parts:
            problems.append(f"{a['format']}: unsafe path {a['path']!r} in {MANIFEST}")
            continue
        path = directory / rel
        label = a["format"] + (f" ({a['quantization']})" if a.get("quantization") not in (None, "none") else "")
        if not path.exists():
            problems.append(f"{label}: {a['path']} is missing")
            continue
        size, sha, files = digest(path)
        if files is not None and a.get("files"):
            listed = {f["path"]: f for f in a["files"]}
            got = {f["path"]: f for f in files}
            for p in sorted(set(listed) | set(got)):
                if p not in got:
                    problems.append(f"{label}: {a['path']}/{p} is missing")
                elif p not in listed:
                    problems.append(f"{label}: {a['path']}/{p} is not in {MANIFEST}")
                elif got[p]["sha256"] != listed[p]["sha256"]:
                    problems.append(
                        f"{label}: {a['path']}/{p}: sha256 {got[p]['sha256'][:12]}… != {listed[p]['sha256'][:12]}…"
                    )
        if size != a.get("bytes"):
            problems.append(f"{label}: {a['path']}: {size} bytes, {MANIFEST} says {a.get('bytes')}")
        if sha != a.get("sha256"):
            problems.append(f"{label}: {a['path']}: sha256 {sha[:12]}… != {str(a.get('sha256'))[:12]}…")
    return problems


def download(
    client: JobsReader,
    name: str,
    dest: Path,
    step: int | str,
    namespace: str,
    image: str | None = None,
    timeout: float = 300,
) -> Path:
    job = client.get(name, namespace)
    export = job.status.export if job.status else None
    if export is None or export.step is None:
        raise NoExports(
            f'pstrainingjob "{name}" in namespace "{namespace}" has no export yet '
            f"(phase {job.status.phase if job.status else 'unset'})"
        )
    image = image or _image(client, job)
    pod_name = f"{name}-artifacts-{secrets.token_hex(3)}"[:63]
    lifetime = max(60, int(timeout) + 30)
    try:
        body = reader_pod(job, pod_name, image, lifetime)
    except ValueError as e:
        raise NoExports(f'pstrainingjob "{name}": {e}') from None
    client._call(f'create reader pod "{pod_name}"', client.core.create_namespaced_pod, namespace, body)
    try:
        _wait_running(client, pod_name, namespace, timeout)
        base = exports_dir(job)
        cat, tar = (STREAM + ["cat"], STREAM + ["tar"]) if job.spec.storage.uri else (["cat"], None)
        if step == "latest":
            none = f'pstrainingjob "{name}": exports/LATEST is missing: no complete export'
            step = _exec(client, pod_name, namespace, [*cat, f"{base}/LATEST"], timeout, missing=none).decode().strip()
            if not step.isdigit():
                raise NoExports(none)
        src = f"{base}/{step}"
        data = _exec(
            client,
            pod_name,
            namespace,
            [*tar, src] if tar else ["tar", "-cf", "-", "-C", src, "."],
            timeout,
            missing=f'pstrainingjob "{name}" has no export at step {step} ({src})',
        )
    finally:
        _delete_pod(client, pod_name, namespace)
    return unpack(data, dest / str(step))


def unpack(data: bytes, target: Path) -> Path:
    """Extract a tar of ``exports/<step>/`` into ``target`` (refusing links and paths outside it), check it
    against its manifest, and move it into place only when it matches."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(tmp, filter="data")
        except tarfile.TarError as e:  # FilterError too: a member escaping the directory, a device file...
            raise ClientError(f"refusing the copy of the export: {e}") from None
        manifest_path = tmp / MANIFEST
        if not manifest_path.is_file():
            raise NoExports(f"the export has no {MANIFEST}: not a published export")
        problems = check_export(tmp, json.loads(manifest_path.read_text(encoding="utf-8")))
        if problems:
            raise ChecksumMismatch("downloaded files differ from manifest.json: " + "; ".join(problems))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
        return target
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _image(client: JobsReader, job: Any) -> str:
    """The image of the job's export Job or trainer pods (it has ``tar``), else ``spec.image``."""
    ns, name = job.metadata.namespace, job.metadata.name
    for j in client._call(
        "list jobs", client.batch.list_namespaced_job, ns, label_selector=f"tfps.dev/job-name={name}"
    ).items:
        return j.spec.template.spec.containers[0].image
    for p in client.pods(name, ns):
        return p.spec.containers[0].image
    if job.spec.image:
        return job.spec.image
    raise ClientError(f'pstrainingjob "{name}": no export Job or pod left to take an image from; pass image=')


def _wait_running(client: JobsReader, pod: str, ns: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        p = client._call(f'read reader pod "{pod}"', client.core.read_namespaced_pod, pod, ns)
        phase = p.status.phase
        if phase == "Running":
            return
        if phase in ("Succeeded", "Failed"):
            raise ClientError(
                f'reader pod "{pod}" ended {phase} before the copy: {p.status.message or p.status.reason or ""}'
            )
        if time.monotonic() > deadline:
            waiting = [cs.state.waiting for cs in (p.status.container_statuses or []) if cs.state and cs.state.waiting]
            why = f"{waiting[0].reason}: {waiting[0].message}" if waiting else phase
            raise WaitTimeout(f'reader pod "{pod}" not Running after {timeout:g}s ({why})', phase)
        time.sleep(0.5)


def _exec(
    client: JobsReader, pod: str, ns: str, command: list[str], timeout: float, missing: str | None = None
) -> bytes:
    """stdout of ``command`` in the reader pod; the API server's refusal (no kubelet to reach, ...) as an
    :class:`ApiError`, a non-zero exit with its stderr."""
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import ERROR_CHANNEL

    try:
        resp = stream(
            client.core.connect_get_namespaced_pod_exec,
            pod,
            ns,
            command=command,
            container="reader",
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=False,
            binary=True,
        )
    except ApiException as e:
        from .kubeapi import translate

        raise translate(e, f'exec in reader pod "{pod}"') from None
    except Exception as e:  # the websocket upgrade failing is raised as a plain exception by the library
        raise ApiError(0, "ExecFailed", str(e).strip(), f'exec in reader pod "{pod}"') from None
    out, err = io.BytesIO(), io.BytesIO()
    deadline = time.monotonic() + timeout
    try:
        while resp.is_open():
            resp.update(timeout=1)
            if resp.peek_stdout():
                out.write(resp.read_stdout())
            if resp.peek_stderr():
                err.write(resp.read_stderr())
            if time.monotonic() > deadline:
                raise WaitTimeout(f'{" ".join(command)} in reader pod "{pod}" ran over {timeout:g}s', None)
        code = _exit_code(resp.read_channel(ERROR_CHANNEL), pod)
    finally:
        resp.close()
    if code not in (0, None):
        text = err.getvalue().decode(errors="replace").strip()
        if missing and "No such file" in text:
            raise NoExports(missing)
        raise ClientError(f'{" ".join(command)} in reader pod "{pod}" exited {code}: {text}')
    return out.getvalue()


def _exit_code(status: bytes | str, pod: str) -> int | None:
    """The exit code in the exec API's closing ``Status``; the API server's own message when the command
    did not run at all (the node's kubelet refused or could not be reached)."""
    import yaml

    doc = yaml.safe_load(status) if status else None
    if not isinstance(doc, dict):
        return None
    if doc.get("status") == "Success":
        return 0
    causes = (doc.get("details") or {}).get("causes") or []
    if doc.get("reason") == "NonZeroExitCode":
        code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), "1")
        return int(code) if str(code).isdigit() else 1
    raise ApiError(
        int(doc.get("code") or 0),
        doc.get("reason") or "ExecFailed",
        str(doc.get("message", "")).strip(),
        f'exec in reader pod "{pod}"',
    )


def _delete_pod(client: JobsReader, pod: str, ns: str) -> None:
    try:
        client._call(f'delete reader pod "{pod}"', client.core.delete_namespaced_pod, pod, ns, grace_period_seconds=0)
    except NotFound:
        pass
