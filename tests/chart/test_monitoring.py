"""The chart's Grafana dashboard and PrometheusRule query only metrics (and labels) the operator exports,
and render only when enabled."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from tfps_operator import metrics as op_metrics

from .helpers import CHART, by_kind, find_helm, objects, template
from .promql import names

HELM = find_helm()
needs_helm = pytest.mark.skipif(HELM is None, reason="helm not built yet: `hack/cluster up` builds it")
DASHBOARD = CHART / "files" / "dashboard.json"
ALERTS = CHART / "files" / "alerts.yaml"


def exported() -> dict[str, set[str]]:
    """Every series name the operator's /metrics can have, with its labels."""
    out: dict[str, set[str]] = {}
    for obj in vars(op_metrics).values():
        if not isinstance(obj, MetricWrapperBase):
            continue
        labels = set(obj._labelnames)
        kind, name = obj._type, obj._name
        if kind == "counter":
            out[f"{name}_total"] = labels
        elif kind == "histogram":
            out.update({f"{name}_bucket": labels | {"le"}, f"{name}_sum": labels, f"{name}_count": labels})
        else:
            out[name] = labels
    return out


def _check(expr: str, where: str) -> set[str]:
    known = exported()
    used, grouping = names(expr)
    unknown = sorted(set(used) - set(known))
    assert not unknown, f"{where}: {unknown} are not metrics of tfps_operator.metrics ({expr})"
    for metric, labels in used.items():
        assert labels <= known[metric], f"{where}: {metric} has no label(s) {sorted(labels - known[metric])}"
    have = set().union(*(known[m] for m in used)) if used else set()
    assert grouping <= have, f"{where}: grouping by {sorted(grouping - have)}, which none of {sorted(used)} has"
    return set(used)


def _dashboard_exprs(dash: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r}", t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v["query"]["query"])
            assert m, v["query"]
            out.append((f"variable {v['name']}", f"{m.group(1)} and on({m.group(2)}) {m.group(1)}"))
    return out


def test_dashboard_queries_only_exported_metrics_and_covers_jobs_and_operator():
    dash = json.loads(DASHBOARD.read_text())
    used = set()
    for where, expr in _dashboard_exprs(dash):
        used |= _check(expr, where)
    # what the dashboard is for: step rate, loss, checkpoint age, restarts, export outcomes, reconciles
    assert {
        "tfps_job_steps_per_second",
        "tfps_job_loss",
        "tfps_job_checkpoint_timestamp_seconds",
        "tfps_job_restart_count",
        "tfps_pod_restarts_total",
        "tfps_export_artifacts_total",
        "tfps_reconcile_total",
        "tfps_api_errors_total",
    } <= used
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_checker_refuses_an_unknown_metric_or_label():
    with pytest.raises(AssertionError, match="tfps_made_up"):
        _check("rate(tfps_made_up_total[5m])", "probe")
    with pytest.raises(AssertionError, match="no label"):
        _check('tfps_job_loss{namespace="x"}', "probe")
    with pytest.raises(AssertionError, match="grouping by"):
        _check("sum by (pod) (tfps_jobs)", "probe")


def _alert_rules(text: str) -> list[dict[str, Any]]:
    groups = yaml.safe_load(text)
    return [r for g in groups for r in g["rules"]]


def test_alerts_query_only_exported_metrics():
    # Helm actions in the file are thresholds and escaped Prometheus templates: stand them in by a number.
    text = re.sub(r"\{\{[^`}]*\}\}", "1", ALERTS.read_text())
    rules = _alert_rules(text)
    assert {r["alert"] for r in rules} == {
        "TFPSJobFailed",
        "TFPSJobStalled",
        "TFPSJobRestartingOften",
        "TFPSExportFailed",
        "TFPSOperatorReconcileErrors",
        "TFPSOperatorAPIErrors",
    }
    for r in rules:
        _check(r["expr"], f"alert {r['alert']}")
        assert r["labels"]["severity"] and r["annotations"]["summary"]


@needs_helm
def test_dashboard_and_rules_render_only_when_enabled():
    default = objects(template(HELM).stdout)
    assert not by_kind(default, "PrometheusRule")
    assert not [c for c in by_kind(default, "ConfigMap") if "grafana_dashboard" in c["metadata"].get("labels", {})]
    objs = objects(
        template(HELM, CHART / "ci" / "servicemonitor-values.yaml", sets=["prometheusRule.stalledMinutes=45"]).stdout
    )
    (cm,) = [c for c in by_kind(objs, "ConfigMap") if c["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert json.loads(cm["data"]["tfps-operator.json"]) == json.loads(DASHBOARD.read_text())
    (rule,) = by_kind(objs, "PrometheusRule")
    rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    stalled = next(r for r in rules if r["alert"] == "TFPSJobStalled")
    assert "> 2700" in stalled["expr"]
    assert "{{ $labels.pstrainingjob }}" in stalled["annotations"]["summary"]
    for r in rules:
        _check(r["expr"], f"rendered alert {r['alert']}")
