"""Connecting to the API server with the ``kubernetes`` library, and its refusals as client errors."""

from __future__ import annotations

import json
import os
from typing import Any

from ...api.validate import FieldError
from .errors import AlreadyExists, ApiError, ClientError, InvalidJob, NotFound


def connect(kubeconfig: str | None = None, context: str | None = None) -> tuple[Any, str]:
    """(``kubernetes.client.ApiClient``, the context's namespace or ``default``), like kubectl: the
    given kubeconfig, else ``$KUBECONFIG`` / ``~/.kube/config``, else the in-cluster service account."""
    from kubernetes import config

    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)
    first = path.split(os.pathsep)[0] if path else ""
    if kubeconfig is None and not os.path.exists(first) and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
        from kubernetes import client

        ns_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
        ns = "default"
        if os.path.exists(ns_file):
            with open(ns_file) as f:
                ns = f.read().strip()
        return client.ApiClient(), ns
    try:
        api = config.new_client_from_config(config_file=path, context=context)
        _contexts, active = config.list_kube_config_contexts(config_file=path)
    except config.ConfigException as e:
        raise ClientError(
            f"cannot use kubeconfig {path}" + (f" (context {context})" if context else "") + f": {e}"
        ) from None
    if context:
        active = next((c for c in _contexts if c["name"] == context), active)
    ns = (active or {}).get("context", {}).get("namespace") or "default"
    return api, ns


def status_body(exc: Any) -> dict[str, Any]:
    """The ``Status`` object of an ``ApiException`` (empty when the body is not one)."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def translate(exc: Any, what: str) -> ApiError | InvalidJob:
    """An ``ApiException`` as the client error it stands for, keeping the API server's message."""
    body = status_body(exc)
    message = body.get("message") or (exc.body if isinstance(exc.body, str) and exc.body.strip() else "") or ""
    reason = body.get("reason") or exc.reason or ""
    status = int(exc.status or 0)
    if status == 404:
        return NotFound(status, reason, message, what)
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists(status, reason, message, what)
    if status == 422:
        causes = (body.get("details") or {}).get("causes") or []
        errors = [FieldError(c.get("field", ""), c.get("message", "")) for c in causes] or [FieldError("", message)]
        return InvalidJob(errors, source=f"the API server ({what})")
    return ApiError(status, reason, str(message).strip(), what)
