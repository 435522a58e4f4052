"""The pure parts of `tfps migrate-storage`; the migration itself runs on the real API server in
tests/api/test_api_versions.py."""

from __future__ import annotations

import pytest

from tfps_operator.api.crd import crd
from tfps_operator.tools.client.errors import ClientError
from tfps_operator.tools.migrate_storage import storage_version, storage_version_hash


def test_the_storage_version_hash_is_the_one_api_discovery_reports() -> None:
    # kube-apiserver's discovery (GET /apis/apps/v1) reports this for deployments, stored as apps/v1.
    assert storage_version_hash("apps", "v1", "Deployment") == "8aSe+NMegvE="


def test_the_storage_version_is_read_from_the_crd_and_an_unknown_one_is_refused() -> None:
    assert storage_version(crd()) == "v1beta1"
    assert storage_version(crd(storage="v1alpha1")) == "v1alpha1"
    future = {"spec": {"versions": [{"name": "v1", "storage": True}, {"name": "v1beta1", "storage": False}]}}
    with pytest.raises(ClientError, match="stores v1, which this tfps does not know"):
        storage_version(future)
