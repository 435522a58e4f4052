"""``TFPSClient``: create, watch, read and manage PSTrainingJobs from Python (and ``tfps get|wait|logs|...``).

    from . import TFPSClient
    c = TFPSClient(namespace="ml")                      # kubeconfig/context like kubectl
    job = c.submit("examples/linear.yaml")              # validated client-side first
    c.wait(job.metadata.name, phase="Succeeded", timeout=600)
    print(c.logs(job.metadata.name, role="chief"))
    c.download_artifacts(job.metadata.name, dest="out/")

Synchronous, on the ``kubernetes`` library; TensorFlow is never imported. Every failure is a
:class:`~.errors.ClientError` carrying the API server's own message.
"""

from __future__ import annotations

import builtins
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...api.models import GROUP, PLURAL, VERSION, PSTrainingJob, PSTrainingJobSpec, PSTrainingJobStatus, Role
from ...api.validate import validate_job
from ...manifests import labels, names
from ...strategies import lead_of
from .. import codepack
from ..jobfile import load_job
from .artifacts import download
from .errors import ClientError, InvalidCode, JobFailed, LogsUnavailable, NotFound, WaitTimeout
from .kubeapi import connect, translate

TERMINAL_PHASES = ("Succeeded", "Failed")
FIELD_MANAGER = "tfps-submit"
APPLY = "application/apply-patch+yaml"
"""Server-side apply (JSON is YAML)."""


@dataclass(frozen=True)
class JobEvent:
    """A Kubernetes Event about the job or one of its children."""

    time: datetime | None
    type: str
    reason: str
    object: str
    """``Kind/name`` of the object the event is about."""
    message: str
    count: int = 1


@dataclass(frozen=True)
class Child:
    """An object the operator created for the job."""

    kind: str
    name: str
    status: str


def build_job(
    name: str,
    spec: PSTrainingJobSpec | dict[str, Any],
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
) -> PSTrainingJob:
    """A job from its parts (``spec`` a model or its wire dict), validated like :func:`load_job`. Without
    ``namespace`` the job goes to the submitting client's namespace."""
    wire_spec = spec.to_wire() if isinstance(spec, PSTrainingJobSpec) else spec
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return load_job({"apiVersion": f"{GROUP}/{VERSION}", "kind": "PSTrainingJob", "metadata": meta, "spec": wire_spec})


class TFPSClient:
    """PSTrainingJobs of one namespace (each call may name another)."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
        api_client: Any = None,
    ):
        from kubernetes import client

        if api_client is None:
            api_client, default_ns = connect(kubeconfig, context)
        else:
            default_ns = "default"
        self.api = api_client
        self.namespace = namespace or default_ns
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # --- helpers ---
    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        from kubernetes.client.rest import ApiException

        try:
            return fn(*args, **kw)
        except ApiException as e:
            raise translate(e, what) from None

    def _what(self, name: str, namespace: str | None) -> str:
        return f'pstrainingjob "{name}" in namespace "{self._ns(namespace)}"'

    # --- jobs ---
    def submit(
        self,
        job: str | Path | dict[str, Any] | PSTrainingJob,
        namespace: str | None = None,
        code: str | Path | None = None,
        apply: bool = False,
    ) -> PSTrainingJob:
        """Validate client-side, then create the job (``apply``: server-side apply, so that submitting it
        again updates it; ``tfps submit`` does). The job's namespace is ``namespace``, else the one in the job
        when it sets one, else the client's.

        ``code``: a directory packed into a ConfigMap ``<job>-code`` owned by the job (``spec.model.source``
        points at it), checked before anything is written; if the ConfigMap cannot be written, a job this
        call created is deleted again, so nothing is left half-submitted.

        Raises :class:`InvalidJob` or :class:`~.errors.InvalidCode` (nothing written), or
        :class:`~.errors.AlreadyExists` (create only)."""
        model = load_job(job)
        pack = None
        if code is not None:
            try:
                pack = codepack.pack(code)
            except codepack.CodePackError as e:
                raise InvalidCode(str(e)) from None
        wire = model.to_wire()
        wire.pop("status", None)
        wire["apiVersion"] = f"{GROUP}/{VERSION}"  # a deprecated version's file: the same fields
        name = model.metadata.name
        # The namespace the job names, if it names one (a model's wire form always carries one: ask the model).
        given = (job if isinstance(job, PSTrainingJob) else model).metadata
        explicit = given.namespace if "namespace" in given.model_fields_set else None
        ns = namespace or explicit or self.namespace
        wire["metadata"]["namespace"] = ns
        if pack is not None:
            wire["spec"]["model"]["source"] = {"configMap": codepack.configmap_name(name), "items": pack.items}
        what = self._what(name, ns)
        existed = apply and self._exists(name, ns)
        if apply:
            written = self._call(
                f"apply {what}",
                self.custom.patch_namespaced_custom_object,
                GROUP,
                VERSION,
                ns,
                PLURAL,
                name,
                wire,
                field_manager=FIELD_MANAGER,
                force=True,
                field_validation="Strict",
                _content_type=APPLY,
                _preload_content=False,  # the generated client decodes only a 200; an apply that creates is a 201
            )
            written = json.loads(written.data)
        else:
            written = self._call(
                f"create {what}", self.custom.create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, wire
            )
        if pack is not None:
            owner = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "PSTrainingJob",
                "name": name,
                "uid": written["metadata"]["uid"],
                "blockOwnerDeletion": True,
            }
            cm = pack.configmap(codepack.configmap_name(name), ns, owner)
            try:
                self._call(
                    f'apply configmap "{cm["metadata"]["name"]}" in namespace "{ns}"',
                    self.core.patch_namespaced_config_map,
                    cm["metadata"]["name"],
                    ns,
                    cm,
                    field_manager=FIELD_MANAGER,
                    force=True,
                    _content_type=APPLY,
                )
            except ClientError:
                if not existed:  # ours alone: take it back rather than leave a job whose code never comes
                    self.delete(name, ns)
                raise
        return validate_job(written, rules=False)

    def _exists(self, name: str, namespace: str) -> bool:
        try:
            self.get(name, namespace)
        except NotFound:
            return False
        return True

    def get(self, name: str, namespace: str | None = None) -> PSTrainingJob:
        """The job as stored, typed (``.status`` is a :class:`PSTrainingJobStatus` or None)."""
        obj = self._call(
            self._what(name, namespace),
            self.custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            self._ns(namespace),
            PLURAL,
            name,
        )
        return validate_job(obj, rules=False)

    def status(self, name: str, namespace: str | None = None) -> PSTrainingJobStatus:
        return self.get(name, namespace).status or PSTrainingJobStatus()

    # Below this method, `list` in the class body names it: annotations there spell `builtins.list`.
    def list(self, namespace: str | None = None, all_namespaces: bool = False) -> list[PSTrainingJob]:
        try:
            if all_namespaces:
                out = self._call("list pstrainingjobs", self.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)
            else:
                ns = self._ns(namespace)
                out = self._call(
                    f'list pstrainingjobs in namespace "{ns}"',
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    ns,
                    PLURAL,
                )
        except NotFound as e:  # listing a namespace that does not exist is allowed: this is the resource
            raise NotFound(
                e.status,
                e.reason,
                f"{e.message} (is the PSTrainingJob CRD installed? tfps crd | kubectl apply -f -)",
                e.what,
            ) from None
        return [validate_job(o, rules=False) for o in out.get("items", [])]

    def delete(self, name: str, namespace: str | None = None, wait: bool = False, timeout: float = 60) -> None:
        """Delete the job (its children go with it, by owner reference); ``wait`` until it is gone."""
        self._call(
            f"delete {self._what(name, namespace)}",
            self.custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            self._ns(namespace),
            PLURAL,
            name,
            body={"propagationPolicy": "Background"},
        )
        deadline = time.monotonic() + timeout
        while wait:
            try:
                self.get(name, namespace)
            except NotFound:
                return
            if time.monotonic() > deadline:
                raise WaitTimeout(f"{self._what(name, namespace)} still exists {timeout:g}s after delete", None)
            time.sleep(0.5)

    def _patch(self, name: str, namespace: str | None, patch: dict[str, Any], verb: str) -> PSTrainingJob:
        obj = self._call(
            f"{verb} {self._what(name, namespace)}",
            self.custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            self._ns(namespace),
            PLURAL,
            name,
            patch,
        )
        return validate_job(obj, rules=False)

    def suspend(self, name: str, namespace: str | None = None) -> PSTrainingJob:
        """``spec.runPolicy.suspend: true``: the operator deletes the pods and keeps the job."""
        return self._patch(name, namespace, {"spec": {"runPolicy": {"suspend": True}}}, "suspend")

    def resume(self, name: str, namespace: str | None = None) -> PSTrainingJob:
        return self._patch(name, namespace, {"spec": {"runPolicy": {"suspend": False}}}, "resume")

    # --- waiting ---
    def wait(
        self,
        name: str,
        namespace: str | None = None,
        phase: str | Iterable[str] | None = None,
        condition: str | None = None,
        condition_status: str = "True",
        timeout: float = 600,
    ) -> PSTrainingJob:
        """Block until the job is in ``phase`` (one or several), or has ``condition`` with
        ``condition_status``; neither given: until it finished (Succeeded or Failed).

        Raises :class:`JobFailed` when the job ends Failed although something else was waited for,
        :class:`WaitTimeout` after ``timeout`` seconds, :class:`NotFound` when it does not exist
        (or is deleted meanwhile). Follows a watch, so it returns as soon as the status changes."""
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        phases = {phase} if isinstance(phase, str) else set(phase or ())
        if not phases and condition is None:
            phases = set(TERMINAL_PHASES)
        ns = self._ns(namespace)
        wanted = " or ".join(sorted(phases)) if phases else f"condition {condition}={condition_status}"
        deadline = time.monotonic() + timeout
        job = self.get(name, ns)
        while True:
            if _reached(job, phases, condition, condition_status):
                return job
            st = job.status or PSTrainingJobStatus()
            if st.phase == "Failed":
                raise JobFailed(f"{self._what(name, ns)} failed while waiting for {wanted}: {_failure_text(st)}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(
                    f"timed out after {timeout:g}s waiting for {self._what(name, ns)} to reach {wanted} "
                    f"(phase {st.phase or 'unset'})",
                    st.phase,
                )
            w = watch.Watch()
            rv = None
            try:
                for event in w.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    ns,
                    PLURAL,
                    field_selector=f"metadata.name={name}",
                    timeout_seconds=max(1, int(left) + 1),
                    resource_version=rv,
                ):
                    if event["type"] == "DELETED":
                        raise NotFound(404, "NotFound", "deleted while waiting", self._what(name, ns))
                    if event["type"] in ("ADDED", "MODIFIED"):
                        job = validate_job(event["object"], rules=False)
                        st = job.status or PSTrainingJobStatus()
                        if _reached(job, phases, condition, condition_status) or st.phase == "Failed":
                            break
                    if time.monotonic() >= deadline:
                        break
            except ApiException as e:
                if e.status != 410:  # 410 Gone: the watch expired; read again and start a new one
                    raise translate(e, f"watch {self._what(name, ns)}") from None
            finally:
                w.stop()
            job = self.get(name, ns)

    # --- pods, logs, events ---
    def pods(self, name: str, namespace: str | None = None) -> builtins.list[Any]:
        ns = self._ns(namespace)
        out = self._call(
            f"list pods of {self._what(name, ns)}",
            self.core.list_namespaced_pod,
            ns,
            label_selector=f"{labels.JOB_NAME}={name}",
        )
        return list(out.items)

    def logs(
        self,
        name: str,
        role: Role | None = None,
        index: int = 0,
        namespace: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str | Iterator[str]:
        """The trainer container's log of pod ``<name>-<role>-<index>`` (``role`` by default the job's lead: the
        chief, or worker 0 of a job without one): the text, or with ``follow`` an iterator of lines until the
        container ends. Raises :class:`LogsUnavailable` with the API server's reason when it has none to give
        (pod not started, kubelet unreachable)."""
        ns = self._ns(namespace)
        job = self.get(name, ns)  # a clear NotFound for the job before one for its pod
        if role is None:
            role = lead_of(job)[0]
        pod = names.pod_name(name, role, index)
        kw: dict[str, Any] = {"previous": previous}
        if tail_lines is not None:
            kw["tail_lines"] = tail_lines
        what = f'logs of pod "{pod}" ({role} {index} of {self._what(name, ns)})'
        from kubernetes.client.rest import ApiException

        try:
            if not follow:
                return self.core.read_namespaced_pod_log(pod, ns, **kw)
            resp = self.core.read_namespaced_pod_log(pod, ns, follow=True, _preload_content=False, **kw)
        except ApiException as e:
            err = translate(e, what)
            if isinstance(err, NotFound):
                raise NotFound(
                    404, "NotFound", f"no pod {pod}: the job has no {role} {index} running now", what
                ) from None
            raise LogsUnavailable(str(err)) from None
        return _lines(resp)

    def events(self, name: str, namespace: str | None = None, children: bool = True) -> builtins.list[JobEvent]:
        """Events about the job and (``children``) the objects it owns, by their names, oldest first."""
        ns = self._ns(namespace)
        out = self._call(f'list events in namespace "{ns}"', self.core.list_namespaced_event, ns)
        found = []
        for e in out.items:
            obj = e.involved_object
            if not (obj.kind == "PSTrainingJob" and obj.name == name) and not (
                children and _is_child(name, obj.kind, obj.name)
            ):
                continue
            when = (
                e.last_timestamp
                or e.event_time
                or e.first_timestamp
                or (e.metadata.creation_timestamp if e.metadata else None)
            )
            found.append(
                JobEvent(
                    time=when,
                    type=e.type or "",
                    reason=e.reason or "",
                    object=f"{obj.kind}/{obj.name}",
                    message=(e.message or "").strip(),
                    count=e.count or 1,
                )
            )
        return sorted(found, key=lambda ev: ev.time or datetime.min.replace(tzinfo=UTC))

    def children(self, name: str, namespace: str | None = None) -> builtins.list[Child]:
        """Pods, the export Jobs, the Service and the PVC the operator made for the job."""
        ns = self._ns(namespace)
        sel = f"{labels.JOB_NAME}={name}"
        kids = [
            Child(
                "Pod",
                p.metadata.name,
                (p.status.phase or "") + (" (deleting)" if p.metadata.deletion_timestamp else ""),
            )
            for p in self.pods(name, ns)
        ]
        for j in self._call("list jobs", self.batch.list_namespaced_job, ns, label_selector=sel).items:
            s = j.status
            state = (
                "Complete"
                if s.succeeded
                else "Failed"
                if s.failed and not s.active
                else "Active"
                if s.active
                else "Pending"
            )
            kids.append(Child("Job", j.metadata.name, state))
        for s in self._call("list services", self.core.list_namespaced_service, ns, label_selector=sel).items:
            kids.append(
                Child(
                    "Service", s.metadata.name, "headless" if s.spec.cluster_ip == "None" else s.spec.cluster_ip or ""
                )
            )
        for c in self._call(
            "list claims", self.core.list_namespaced_persistent_volume_claim, ns, label_selector=sel
        ).items:
            kids.append(Child("PersistentVolumeClaim", c.metadata.name, c.status.phase or ""))
        return kids

    # --- artifacts ---
    def download_artifacts(
        self,
        name: str,
        dest: str | Path,
        step: int | str = "latest",
        namespace: str | None = None,
        image: str | None = None,
        timeout: float = 300,
    ) -> Path:
        """Copy ``exports/<step>/`` off the job's volume into ``dest/<step>/`` and check every file
        against its ``manifest.json``; returns that directory. See :mod:`.artifacts`."""
        return download(self, name, Path(dest), step, self._ns(namespace), image=image, timeout=timeout)


def _reached(job: PSTrainingJob, phases: set[str], condition: str | None, condition_status: str) -> bool:
    st = job.status or PSTrainingJobStatus()
    if phases and st.phase in phases:
        return True
    if condition is not None:
        return any(c.type == condition and c.status == condition_status for c in st.conditions)
    return False


def _is_child(job: str, kind: str, name: str) -> bool:
    """Whether ``kind/name`` is named as one of ``job``'s children (not those of a job ``<job>-x``)."""
    if kind in ("Service", "NetworkPolicy"):
        return name == names.service_name(job)
    if kind == "PersistentVolumeClaim":
        return name == names.pvc_name(job)
    if kind == "Job":
        return name in (names.export_job_name(job), names.preflight_job_name(job))
    if kind == "Pod":
        e = re.escape(job)
        return bool(
            re.fullmatch(
                rf"{e}-(chief|ps|worker|evaluator)-\d+|{e}-(export|preflight)-[a-z0-9]{{5}}|{e}-artifacts-[0-9a-f]+",
                name,
            )
        )
    return False


def _failure_text(st: PSTrainingJobStatus) -> str:
    c = next((c for c in st.conditions if c.type == "Failed" and c.status == "True"), None)
    return f"{c.reason}: {c.message}" if c else "no Failed condition recorded"


def _lines(resp: Any) -> Iterator[str]:
    """Lines of a streamed HTTP response (a followed log), released when the iterator is closed."""
    buf = b""
    try:
        for chunk in resp.stream(4096):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield line.decode(errors="replace") + "\n"
        if buf:
            yield buf.decode(errors="replace")
    finally:
        resp.release_conn()


__all__ = ["TFPSClient", "JobEvent", "Child", "load_job", "build_job", "TERMINAL_PHASES"]
