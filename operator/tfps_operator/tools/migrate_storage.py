"""`tfps migrate-storage [--dry-run]`: rewrite every stored PSTrainingJob at the CRD's storage version, then
drop the older versions from the CRD's ``status.storedVersions`` (docs/install.md, "API versions").

etcd keeps each object in the version it was last written in. Once the CRD stores a newer version, an object
written before is still held in the older one, and the API server refuses to remove that older version from
the CRD while ``status.storedVersions`` lists it. This is what Kubernetes' storage version migrator does: wait
until API discovery reports the CRD's storage version (``storageVersionHash``), then read each object and write
it back unchanged (the API server encodes it at the storage version; the bytes differ,
so it is written), paging through every namespace. A write that conflicts (409) means the object was written
since it was listed, at the storage version: nothing left to do. ``storedVersions`` is narrowed only when every
object was migrated.

Admin credentials: it lists and updates PSTrainingJobs in every namespace and patches the CRD's status, which
the operator's account may not.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, cast

from ..api.crd import CRD_NAME, SERVED_VERSIONS
from ..api.models import GROUP, KIND, PLURAL
from .client.errors import ClientError
from .client.kubeapi import connect, translate

FIELD_MANAGER = "tfps-migrate-storage"
PAGE = 250


@dataclass
class Migration:
    storage_version: str
    stored_before: list[str]
    rewritten: list[str] = field(default_factory=list)
    written_since: list[str] = field(default_factory=list)
    """Written by someone else after the list (409): already at the storage version."""
    gone: list[str] = field(default_factory=list)
    stored_after: list[str] = field(default_factory=list)


def storage_version(crd: dict[str, Any]) -> str:
    """The CRD's storage version, one this tfps serves (an older CRD than this tfps's is applied first)."""
    (stored,) = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
    if stored not in SERVED_VERSIONS:
        raise ClientError(
            f"CustomResourceDefinition {CRD_NAME} stores {stored}, which this tfps does not know "
            f"({', '.join(SERVED_VERSIONS)}): apply this version's CRD first "
            "(kubectl apply --server-side --force-conflicts -f charts/tfps-operator/crds/)"
        )
    return stored


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """What API discovery reports as a resource's ``storageVersionHash`` when ``version`` is stored
    (Kubernetes' ``discovery.StorageVersionHash``)."""
    return base64.b64encode(hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()[:8]).decode()


def wait_for_storage(api_client: Any, version: str, timeout: float = 60.0) -> None:
    """Until the API server's discovery reports ``version`` as the storage version: a CRD update reaches the
    API server's storage asynchronously, and a rewrite before then would store the old version again."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    want = storage_version_hash(GROUP, version, KIND)
    deadline = time.monotonic() + timeout
    while True:
        try:
            listing = client.CustomObjectsApi(api_client).get_api_resources(GROUP, version)
        except ApiException as e:
            raise translate(e, f"API discovery of {GROUP}/{version}") from None
        seen = next((r.storage_version_hash or "" for r in listing.resources if r.name == PLURAL), "")
        if seen == want:
            return
        if time.monotonic() > deadline:
            raise ClientError(
                f"the API server still reports another storage version for {PLURAL}.{GROUP} after {timeout:.0f} s "
                f"(storageVersionHash {seen!r}, {version} is {want!r}); run tfps migrate-storage again"
            )
        time.sleep(0.5)


def migrate(api_client: Any, dry_run: bool = False) -> Migration:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    ext, custom = client.ApiextensionsV1Api(api_client), client.CustomObjectsApi(api_client)
    try:
        crd = api_client.sanitize_for_serialization(ext.read_custom_resource_definition(CRD_NAME))
    except ApiException as e:
        raise translate(e, f"CustomResourceDefinition {CRD_NAME}") from None
    result = Migration(storage_version(crd), list((crd.get("status") or {}).get("storedVersions") or []))
    wait_for_storage(api_client, result.storage_version)
    token: str | None = None
    while True:
        try:
            page = cast(
                dict[str, Any],
                custom.list_cluster_custom_object(GROUP, result.storage_version, PLURAL, limit=PAGE, _continue=token),
            )
        except ApiException as e:
            raise translate(e, "list pstrainingjobs in every namespace") from None
        for obj in page["items"]:
            meta = obj["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            if dry_run:
                result.rewritten.append(key)
                continue
            try:
                custom.replace_namespaced_custom_object(
                    GROUP,
                    result.storage_version,
                    meta["namespace"],
                    PLURAL,
                    meta["name"],
                    obj,
                    field_manager=FIELD_MANAGER,
                )
                result.rewritten.append(key)
            except ApiException as e:
                if e.status == 409:
                    result.written_since.append(key)
                elif e.status == 404:
                    result.gone.append(key)
                else:
                    raise translate(e, f"rewrite PSTrainingJob {key}") from None
        token = page["metadata"].get("continue") or None
        if token is None:
            break
    result.stored_after = result.stored_before
    if not dry_run and result.stored_before != [result.storage_version]:
        try:
            ext.patch_custom_resource_definition_status(
                CRD_NAME, {"status": {"storedVersions": [result.storage_version]}}
            )
        except ApiException as e:
            raise translate(e, f"patch the status of CustomResourceDefinition {CRD_NAME}") from None
        result.stored_after = [result.storage_version]
    return result


def main(args: argparse.Namespace) -> int:
    try:
        api_client, _ = connect(args.kubeconfig, args.context)
        try:
            result = migrate(api_client, dry_run=args.dry_run)
        finally:
            api_client.close()
    except ClientError as exc:
        print(f"tfps migrate-storage: {exc}", file=sys.stderr)
        return exc.exit_code
    verb = "would rewrite" if args.dry_run else "rewrote"
    print(
        f"{verb} {len(result.rewritten)} PSTrainingJob(s) at {GROUP}/{result.storage_version}"
        f" ({len(result.written_since)} written since the list, {len(result.gone)} deleted);"
        f" storedVersions {result.stored_before} -> {result.stored_after}"
    )
    return 0
