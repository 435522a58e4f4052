"""The only place that talks to the API server: :mod:`.client` (REST calls, create-or-adopt, status,
Events) and :mod:`.executor` (carries out a reconcile Plan)."""

from .client import ApiError, ChildConflict, Kube

__all__ = ["ApiError", "ChildConflict", "Kube"]
