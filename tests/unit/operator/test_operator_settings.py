"""Operator settings from flags and TFPS_* environment variables, and the status patch it writes."""

from __future__ import annotations

from argparse import Namespace

import pytest

from tfps_operator.api.models import PSTrainingJobStatus
from tfps_operator.reconcile.writes import status_patch
from tfps_operator.runner import kopf_kwargs
from tfps_operator.settings import from_args

NO_FLAGS = Namespace(
    namespace=None,
    default_image=None,
    log_format=None,
    health_port=None,
    metrics_port=None,
    leader_elect=False,
    kubeconfig=None,
    verbose=False,
)


def test_defaults_outside_a_pod_bind_loopback_and_watch_everything():
    s = from_args(NO_FLAGS, {})
    assert s.namespaces == () and s.bind_address == "127.0.0.1"
    assert (s.health_port, s.metrics_port, s.log_format, s.leader_election) == (8080, 9090, "plain", False)
    assert s.build.default_image == "tfps-trainer:0.1.0"
    assert (
        s.max_concurrent_passes == 32
        and from_args(NO_FLAGS, {"TFPS_MAX_CONCURRENT_RECONCILES": "4"}).max_concurrent_passes == 4
    )
    assert (
        s.api_max_connections == 16 and from_args(NO_FLAGS, {"TFPS_API_MAX_CONNECTIONS": "4"}).api_max_connections == 4
    )
    kw = kopf_kwargs(s)
    assert kw["clusterwide"] is True and kw["standalone"] is True
    assert kw["liveness_endpoint"] == "http://127.0.0.1:8080/healthz"


def test_in_a_pod_servers_listen_on_all_interfaces_and_the_netpol_names_the_operator_namespace():
    s = from_args(NO_FLAGS, {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "TFPS_OPERATOR_NAMESPACE": "tfps-system"})
    assert s.bind_address == "0.0.0.0"
    assert dict(s.build.operator_namespace_labels) == {"kubernetes.io/metadata.name": "tfps-system"}


def test_environment_fallbacks_and_flags_win_over_them():
    env = {
        "TFPS_NAMESPACES": "a, b",
        "TFPS_DEFAULT_IMAGE": "img:1",
        "TFPS_LOG_FORMAT": "json",
        "TFPS_LEADER_ELECTION": "true",
        "TFPS_HEALTH_PORT": "1234",
        "TFPS_OPERATOR_POD_LABELS": "app=op,tier=control",
    }
    s = from_args(NO_FLAGS, env)
    assert s.namespaces == ("a", "b") and s.build.default_image == "img:1" and s.log_format == "json"
    assert s.leader_election and s.health_port == 1234
    assert dict(s.build.operator_pod_labels) == {"app": "op", "tier": "control"}
    flags = Namespace(**{**vars(NO_FLAGS), "namespace": ["c"], "default_image": "img:2", "health_port": 99})
    s = from_args(flags, env)
    assert s.namespaces == ("c",) and s.build.default_image == "img:2" and s.health_port == 99
    kw = kopf_kwargs(s)
    assert kw["namespaces"] == ["c"] and kw["clusterwide"] is False and kw["standalone"] is True  # never Kopf peering


def test_the_metrics_scraper_is_off_unless_its_labels_are_set():
    assert from_args(NO_FLAGS, {}).build.metrics_scraper is None
    s = from_args(NO_FLAGS, {"TFPS_METRICS_SCRAPER_POD_LABELS": "app=prom"})
    assert s.build.metrics_scraper == (None, {"app": "prom"})
    s = from_args(
        NO_FLAGS, {"TFPS_METRICS_SCRAPER_NAMESPACE_LABELS": "team=mon", "TFPS_METRICS_SCRAPER_POD_LABELS": ""}
    )
    assert s.build.metrics_scraper == ({"team": "mon"}, {})


@pytest.mark.parametrize(
    "env,field",
    [
        ({"TFPS_LOG_FORMAT": "xml"}, "TFPS_LOG_FORMAT"),
        ({"TFPS_OPERATOR_POD_LABELS": "novalue"}, "novalue"),
        ({"TFPS_METRICS_SCRAPER_POD_LABELS": "app"}, "TFPS_METRICS_SCRAPER_POD_LABELS"),
        ({"TFPS_MAX_CONCURRENT_RECONCILES": "0"}, "TFPS_MAX_CONCURRENT_RECONCILES"),
        ({"TFPS_MAX_CONCURRENT_RECONCILES": "many"}, "TFPS_MAX_CONCURRENT_RECONCILES"),
        ({"TFPS_API_MAX_CONNECTIONS": "0"}, "TFPS_API_MAX_CONNECTIONS"),
    ],
)
def test_bad_settings_name_the_variable(env, field):
    with pytest.raises(ValueError, match=field):
        from_args(NO_FLAGS, env)


def test_status_patch_carries_only_the_reconcilers_fields_and_nulls_to_remove():
    st = PSTrainingJobStatus.model_validate({"phase": "Suspended", "restarts": 2, "checkpoint": {"step": 5}})
    patch = status_patch(st)
    assert patch["phase"] == "Suspended" and patch["restarts"] == 2
    assert patch["startTime"] is None  # merge patch: removes a stale start time
    assert "progress" not in patch  # the progress monitor's field
    assert patch["checkpoint"] == {"step": 5}  # the reconciler also writes it, from the chief's success summary


def test_leader_election_settings_lease_in_the_operator_namespace_and_timings_checked():
    env = {"TFPS_OPERATOR_NAMESPACE": "tfps-system", "POD_NAME": "op-abc"}
    s = from_args(Namespace(**{**vars(NO_FLAGS), "leader_elect": True}), env)
    assert s.leader_election and (s.lease_namespace, s.lease_name) == ("tfps-system", "tfps-operator")
    assert s.identity.startswith("op-abc_") and s.identity != from_args(NO_FLAGS, env).identity  # a new candidate
    t = s.lease_timings
    assert (t.lease_duration, t.renew_deadline, t.retry_period) == (15, 10, 2)
    assert from_args(NO_FLAGS, {"TFPS_NAMESPACES": "a,b"}).lease_namespace == "a"
    with pytest.raises(ValueError, match="TFPS_LEASE_DURATION_SECONDS .* must be greater than TFPS_RENEW_DEADLINE"):
        from_args(NO_FLAGS, {"TFPS_LEASE_DURATION_SECONDS": "10", "TFPS_RENEW_DEADLINE_SECONDS": "10"})
    with pytest.raises(ValueError, match="TFPS_RENEW_DEADLINE_SECONDS .* must be greater than TFPS_RETRY_PERIOD"):
        from_args(NO_FLAGS, {"TFPS_RENEW_DEADLINE_SECONDS": "2"})
    with pytest.raises(ValueError, match="TFPS_LEADER_ELECTION: must be true or false"):
        from_args(NO_FLAGS, {"TFPS_LEADER_ELECTION": "yes please"})
