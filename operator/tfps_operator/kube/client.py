"""A small async client for the few resources the operator touches: aiohttp with the credentials of
Kopf's own login (a :class:`kopf.ConnectionInfo`: TLS context and Authorization header), refreshed by
logging in again on a 401 (a rotated service-account token). Objects are plain dicts (what the
builders produce and the observers read).

Not a generated client library on purpose: importing one (kubernetes_asyncio) costs the operator
process about 40 MiB of model classes it never uses, and Kopf imports whichever is installed.

Rules that belong to I/O, not to business logic, live here: a create that meets an existing object
of the same owner adopts it (409 is not an error), deletes are idempotent and can be pinned to one
incarnation by uid, status goes through the status subresource guarded by resourceVersion.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf

from .. import metrics
from ..api.models import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)

RESOURCES: dict[str, tuple[str, str]] = {
    "Pod": ("/api/v1", "pods"),
    "Service": ("/api/v1", "services"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "Event": ("/api/v1", "events"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    "Job": ("/apis/batch/v1", "jobs"),
    "PodGroup": ("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups"),
    "Workload": ("/apis/kueue.x-k8s.io/v1beta2", "workloads"),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors"),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
    "PSTrainingJob": (f"/apis/{GROUP}/{VERSION}", PLURAL),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "InferenceService": ("/apis/serving.kserve.io/v1beta1", "inferenceservices"),
}
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
COMPONENT = "tfps-operator"
DEFAULT_TIMEOUT_SECONDS = 30.0
"""Longest any one API call may take, connect to last byte (``TFPS_API_TIMEOUT_SECONDS``)."""
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5.0
"""Longest a connection to the API server may take to open (``TFPS_API_CONNECT_TIMEOUT_SECONDS``)."""
DEFAULT_MAX_CONNECTIONS = 16
"""Connections open at once for requests (``TFPS_API_MAX_CONNECTIONS``); watches have their own. Each
TLS connection holds about 300 KiB (asyncio's 256 KiB read buffer and the TLS state), and one
connection carries a few hundred small requests a second, so a burst of new jobs queues for a
connection rather than opening a hundred."""
TIMEOUT_STATUS = 504
"""The status an :class:`ApiError` carries when the API server did not answer in time."""
UNREACHABLE_STATUS = 503
"""The status an :class:`ApiError` carries when the connection failed before an answer."""


class ApiError(Exception):
    """The API server refused a request; ``message`` is its own explanation."""

    def __init__(self, status: int, reason: str, message: str, verb: str, what: str):
        super().__init__(f"{verb} {what}: {status} {reason}: {message}")
        self.status, self.reason, self.message, self.verb, self.what = status, reason, message, verb, what


class ChildConflict(Exception):
    """A child's name is taken by an object this job does not control."""


class NotLeader(Exception):
    """A write refused before it was sent: this replica's leadership lapsed (:attr:`Kube.write_gate`)."""


def _path(kind: str, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
    """The resource path; ``namespace`` None: across all namespaces (lists and watches only)."""
    base, plural = RESOURCES[kind]
    where = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return "/".join(filter(None, (where, name, sub)))


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


Login = Callable[[], "kopf.ConnectionInfo | None"]
"""Returns fresh credentials (Kopf's login functions), or None when there are none."""


class Kube:
    def __init__(
        self,
        login: Login,
        field_manager: str = COMPONENT,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        instance: str | None = None,
    ):
        self.login = login
        self.field_manager = field_manager
        self.timeout = aiohttp.ClientTimeout(total=timeout, connect=connect_timeout)
        self.max_connections = max_connections
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        """This replica, in the User-Agent and in Events (the leader election's identity when it runs)."""
        self.write_gate: Callable[[], bool] | None = None
        """With leader election: whether this replica may write now; asked before every write but the
        lease's own, so a replica whose leadership lapsed (paused past its renew deadline) sends none."""
        self._session: aiohttp.ClientSession | None = None
        """Requests, at most :attr:`max_connections` at once (the rest wait for a connection)."""
        self._watches: aiohttp.ClientSession | None = None
        """Watches, one long-lived connection each (one per watched kind and namespace)."""
        self._server = ""

    @classmethod
    async def connect(
        cls,
        login: Login,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        instance: str | None = None,
    ) -> Kube:
        kube = cls(
            login, timeout=timeout, connect_timeout=connect_timeout, max_connections=max_connections, instance=instance
        )
        kube._open()
        return kube

    def _open(self) -> None:
        info = self.login()
        if info is None:
            raise kopf.LoginError("no Kubernetes credentials: neither a service account nor a kubeconfig")
        headers = {
            **info.as_http_headers(),
            "User-Agent": f"{COMPONENT}/{self.instance[:64]}",
            "Accept": "application/json",
        }
        self._server = info.server.rstrip("/")
        ssl = info.as_ssl_context()

        def session(limit: int) -> aiohttp.ClientSession:
            # trust_env=False: never through a proxy from the environment.
            return aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=limit, ssl=ssl),
                headers=headers,
                trust_env=False,
                timeout=self.timeout,
            )

        self._session, self._watches = session(self.max_connections), session(0)

    async def close(self) -> None:
        for session in (self._session, self._watches):
            if session is not None:
                await session.close()

    async def request(
        self,
        verb: str,
        path: str,
        *,
        what: str,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        answer: bool = True,
        gated: bool = True,
    ) -> Any:
        """Send one request; returns the decoded answer (``answer`` False: None, the answer unread).
        A write (``gated``: all but the lease's own) raises :class:`NotLeader` unsent when the write gate
        is closed."""
        if gated and verb in WRITES and self.write_gate is not None and not self.write_gate():
            metrics.WRITES_REFUSED.inc()
            raise NotLeader(f"{verb} {what}: not sent: this replica is not the leader (its renew deadline passed)")
        data = None if body is None else json.dumps(body)
        for attempt in (1, 2):
            assert self._session is not None
            try:
                async with self._session.request(
                    verb, self._server + path, params=query or None, data=data, headers={"Content-Type": content_type}
                ) as resp:
                    raw = await resp.read()
                    status, reason = resp.status, resp.reason or ""
            except TimeoutError:
                metrics.API_ERRORS.labels(verb=verb.lower(), code=str(TIMEOUT_STATUS)).inc()
                raise ApiError(
                    TIMEOUT_STATUS,
                    "Timeout",
                    f"no answer within {self.timeout.total:g}s (connect limit {self.timeout.connect:g}s)",
                    verb,
                    what,
                ) from None
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                # refused, reset or cut off (the API server restarting or unreachable): like a timeout, the
                # caller retries later, and a write that may have landed is adopted then (409)
                metrics.API_ERRORS.labels(verb=verb.lower(), code=str(UNREACHABLE_STATUS)).inc()
                raise ApiError(UNREACHABLE_STATUS, "Unreachable", f"{type(exc).__name__}: {exc}", verb, what) from None
            if status == 401 and attempt == 1:  # a rotated token: log in again, once
                await self.close()
                self._open()
                continue
            break
        if status >= 400:
            try:
                message = json.loads(raw or b"{}").get("message") or reason
            except (TypeError, ValueError, AttributeError):
                message = raw.decode(errors="replace")[:500] or reason
            metrics.API_ERRORS.labels(verb=verb.lower(), code=str(status)).inc()
            raise ApiError(status, reason, str(message), verb, what)
        return json.loads(raw) if raw and answer else None

    # --- reads ----------------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", _path(kind, namespace, name), what=f"{kind}/{name}")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def list_page(
        self, kind: str, namespace: str | None, label_selector: str, limit: int, cont: str | None = None
    ) -> dict[str, Any]:
        """One page of a list (``namespace`` None: all namespaces); ``metadata.continue`` names the next."""
        query: list[tuple[str, Any]] = [("labelSelector", label_selector), ("limit", limit)]
        if cont:
            query.append(("continue", cont))
        out: dict[str, Any] = await self.request("GET", _path(kind, namespace), what=f"{kind} list", query=query)
        return out

    async def watch(
        self, kind: str, namespace: str | None, label_selector: str, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]:
        """The watch events (``{"type", "object"}``) after ``resource_version``, with bookmarks, until
        the server ends the stream (about ``timeout_seconds``). Raises :class:`ApiError` when refused."""
        query: list[tuple[str, Any]] = [
            ("watch", "1"),
            ("labelSelector", label_selector),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        if self._watches is None or self._watches.closed:
            self._open()
        assert self._watches is not None
        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout.connect, sock_read=timeout_seconds + 30)
        async with self._watches.get(self._server + _path(kind, namespace), params=query, timeout=timeout) as resp:
            if resp.status == 401:  # a rotated token: log in again for the next attempt
                await self.close()
                self._open()
            if resp.status >= 400:
                raw = await resp.read()
                try:
                    message = json.loads(raw or b"{}").get("message") or resp.reason or ""
                except (TypeError, ValueError, AttributeError):
                    message = raw.decode(errors="replace")[:500]
                metrics.API_ERRORS.labels(verb="watch", code=str(resp.status)).inc()
                raise ApiError(resp.status, resp.reason or "", str(message), "WATCH", f"{kind} watch")
            pending = b""
            async for chunk in resp.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)

    # --- writes ---------------------------------------------------------------------------------

    async def create_or_adopt(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create ``manifest``; if its name exists and is controlled by the same owner, return that
        (created=False). Raises :class:`ChildConflict` when someone else owns the name."""
        kind, meta = manifest["kind"], manifest["metadata"]
        ns, name = meta["namespace"], meta["name"]
        try:
            obj = await self.request(
                "POST",
                _path(kind, ns),
                what=f"{kind}/{name}",
                body=manifest,
                query=[("fieldManager", self.field_manager)],
            )
            return obj, True
        except ApiError as exc:
            if exc.status != 409:
                raise
        existing = await self.get(kind, ns, name)
        if existing is None:  # deleted in between: the next reconciliation creates it
            raise ApiError(
                409, "Conflict", f"{kind}/{name} exists but vanished while being read", "POST", f"{kind}/{name}"
            )
        want = manifest["metadata"]["ownerReferences"][0]["uid"]
        if controller_uid(existing) != want:
            raise ChildConflict(
                f"{kind}/{name} already exists and is not controlled by this PSTrainingJob; delete or rename it"
            )
        return existing, False

    async def dry_run_create(self, manifest: dict[str, Any]) -> None:
        """Have the API server validate and admit ``manifest`` without storing it (``dryRun=All``);
        raises :class:`ApiError` with its refusal. An existing object of that name (409) passes."""
        kind, meta = manifest["kind"], manifest["metadata"]
        try:
            await self.request(
                "POST",
                _path(kind, meta["namespace"]),
                what=f"{kind}/{meta['name']} (dry run)",
                body=manifest,
                query=[("dryRun", "All"), ("fieldManager", self.field_manager)],
            )
        except ApiError as exc:
            if exc.status != 409:
                raise

    async def delete(
        self, kind: str, namespace: str, name: str, uid: str | None = None, grace_seconds: int | None = None
    ) -> bool:
        """Delete (background propagation); True if deleted now, False if already gone or replaced."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            await self.request("DELETE", _path(kind, namespace, name), what=f"{kind}/{name}", body=body, answer=False)
            return True
        except ApiError as exc:
            if exc.status in (404, 409):  # gone, or a different incarnation now holds the name
                return False
            raise

    async def delete_collection(
        self, kind: str, namespace: str, label_selector: str, field_selector: str | None = None
    ) -> None:
        """Delete every ``kind`` matching the selectors in one request (background propagation). The
        answer (every deleted object, whole) is not decoded: the caller knows what it selected."""
        query: list[tuple[str, Any]] = [("labelSelector", label_selector)]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        await self.request(
            "DELETE", _path(kind, namespace), what=f"{kind} collection", query=query, body=body, answer=False
        )

    async def served(self, kind: str) -> bool:
        """Whether the API server serves ``kind``'s group and version (discovery, which every authenticated
        identity may read): False when its CRD is not installed."""
        base = RESOURCES[kind][0]
        try:
            await self.request("GET", base, what=f"{base} discovery", answer=False)
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create ``manifest`` (no adoption: an existing name raises :class:`ApiError` 409)."""
        kind, meta = manifest["kind"], manifest["metadata"]
        out: dict[str, Any] = await self.request(
            "POST",
            _path(kind, meta["namespace"]),
            what=f"{kind}/{meta['name']}",
            body=manifest,
            query=[("fieldManager", self.field_manager)],
        )
        return out

    async def merge_patch(self, manifest: dict[str, Any], resource_version: str | None) -> dict[str, Any]:
        """Merge-patch the object to ``manifest``'s annotations and spec (fields it leaves out are kept);
        with ``resource_version`` the write fails (409) if the object changed since it was read."""
        kind, meta = manifest["kind"], manifest["metadata"]
        patch: dict[str, Any] = {"metadata": {"annotations": meta.get("annotations") or {}}, "spec": manifest["spec"]}
        if resource_version:
            patch["metadata"]["resourceVersion"] = resource_version
        out: dict[str, Any] = await self.request(
            "PATCH",
            _path(kind, meta["namespace"], meta["name"]),
            what=f"{kind}/{meta['name']}",
            body=patch,
            content_type="application/merge-patch+json",
            query=[("fieldManager", self.field_manager)],
        )
        return out

    async def patch_status(
        self,
        namespace: str,
        name: str,
        status: dict[str, Any],
        resource_version: str | None,
        kind: str = "PSTrainingJob",
    ) -> dict[str, Any]:
        """Merge-patch ``status`` through the status subresource. With ``resource_version`` the write
        fails (409) if the object changed since it was read."""
        patch: dict[str, Any] = {"status": status}
        if resource_version:
            patch["metadata"] = {"resourceVersion": resource_version}
        return await self.request(
            "PATCH",
            _path(kind, namespace, name, "status"),
            what=f"{kind}/{name} status",
            body=patch,
            content_type="application/merge-patch+json",
            query=[("fieldManager", self.field_manager)],
        )

    async def event(self, job: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Post a core/v1 Event about the job; failures are logged, never raised."""
        meta = job["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": job.get("apiVersion"),
                "kind": job.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": f"{GROUP}/operator",
            "reportingInstance": self.instance[:128],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.request("POST", _path("Event", meta["namespace"]), what="Event", body=body, answer=False)
        except ApiError as exc:
            log.warning("could not post event %s for %s/%s: %s", reason, meta["namespace"], meta["name"], exc)
