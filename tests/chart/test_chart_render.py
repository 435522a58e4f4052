"""`helm lint` and `helm template` of charts/tfps-operator with every values file in its ci/ folder,
and what the rendered objects must look like. No API server here (tests/chart/test_chart_cluster.py
dry-runs every rendered object against the real one); helm is the binary hack/cluster builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tfps_operator import settings as op_settings
from tfps_operator.api.crd import crd_yaml
from tfps_operator.tools.cli import _parser

from .helpers import CHART, CI_VALUES, ROOT, by_kind, container_env, find_helm, objects, one, rule_set, run, template

HELM = find_helm()
needs_helm = pytest.mark.skipif(HELM is None, reason="helm not built yet: `hack/cluster up` builds it")

VALUES_IDS = [p.name.removesuffix("-values.yaml") for p in CI_VALUES]


def test_ci_values_cover_the_supported_configurations():
    assert set(VALUES_IDS) >= {"clusterwide", "namespaced", "servicemonitor", "custom-image", "gang", "kueue"}


def test_chart_crd_is_the_generated_crd():
    """Helm installs charts/tfps-operator/crds/: a link to crds/pstrainingjobs.tfps.dev.yaml (which
    tests/api keeps equal to `tfps crd`), so the two can never drift; `helm package` stores its content."""
    chart_crd = CHART / "crds" / "pstrainingjobs.tfps.dev.yaml"
    assert [p.name for p in (CHART / "crds").iterdir()] == ["pstrainingjobs.tfps.dev.yaml"]
    assert chart_crd.resolve() == (ROOT / "crds" / "pstrainingjobs.tfps.dev.yaml").resolve()
    assert yaml.safe_load(chart_crd.read_text()) == yaml.safe_load(crd_yaml())


@needs_helm
def test_helm_sees_the_generated_crd():
    shown = [d for d in yaml.safe_load_all(run([HELM, "show", "crds", str(CHART)]).stdout) if d]
    assert shown == [yaml.safe_load(crd_yaml())]


def test_values_defaults_match_the_operator_defaults():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    defaults = op_settings.OperatorSettings()
    assert values["trainerImage"] == op_settings.DEFAULT_TRAINER_IMAGE
    assert values["operator"]["healthPort"] == defaults.health_port
    assert values["operator"]["metricsPort"] == defaults.metrics_port
    assert values["metrics"]["service"]["port"] == defaults.metrics_port


@needs_helm
@pytest.mark.parametrize("values", CI_VALUES, ids=VALUES_IDS)
def test_helm_lint(values: Path):
    out = run([HELM, "lint", "--strict", str(CHART), "-f", str(values)])
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


@needs_helm
@pytest.mark.parametrize("values", CI_VALUES, ids=VALUES_IDS)
def test_rendered_deployment_is_hardened_and_configured(values: Path):
    objs = objects(template(HELM, values).stdout)
    vals = yaml.safe_load(values.read_text()) or {}
    dep = one(objs, "Deployment")
    spec = dep["spec"]
    if (vals.get("leaderElection") or {}).get("enabled"):  # standbys may overlap: the Lease keeps one acting
        assert spec["replicas"] == vals.get("replicaCount", 1) and spec["strategy"] == {"type": "RollingUpdate"}
    else:  # the old pod goes before a new one starts
        assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == one(objs, "ServiceAccount")["metadata"]["name"]
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0 and psc["seccompProfile"]["type"] == "RuntimeDefault"
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/tmp"}
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    # The container command is a valid `tfps operator` invocation (the image's ENTRYPOINT is tfps).
    assert _parser().parse_args(c["args"]).command == "operator"
    env = container_env(dep)
    assert env["TFPS_DEFAULT_IMAGE"] == vals.get("trainerImage", op_settings.DEFAULT_TRAINER_IMAGE)
    assert env["TFPS_NAMESPACES"] == ",".join(vals.get("watchNamespaces", []))
    assert int(env["TFPS_HEALTH_PORT"]) == ports["health"] and int(env["TFPS_METRICS_PORT"]) == ports["metrics"]
    assert env["TFPS_OPERATOR_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    # The operator admits its own pods to the trainers' progress port by these labels: they must be
    # labels the operator pod really has.
    pod_labels = spec["template"]["metadata"]["labels"]
    wanted = dict(kv.split("=", 1) for kv in env["TFPS_OPERATOR_POD_LABELS"].split(","))
    assert wanted.items() <= pod_labels.items() and wanted == spec["selector"]["matchLabels"]


@needs_helm
@pytest.mark.parametrize("values", CI_VALUES, ids=VALUES_IDS)
def test_chart_sets_only_settings_the_operator_reads(values: Path):
    """Every TFPS_* variable the chart sets is parsed by tfps_operator.settings (no silent typos),
    and the settings built from that environment are the values' settings."""
    dep = one(objects(template(HELM, values).stdout), "Deployment")
    env = container_env(dep)
    source = Path(op_settings.__file__).read_text()
    for name in env:
        if name.startswith("TFPS_"):
            assert f'"{name}"' in source, f"the chart sets {name}, which tfps_operator.settings never reads"
    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    plain["TFPS_OPERATOR_NAMESPACE"] = "tfps-system"
    plain["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    s = op_settings.from_args(_parser().parse_args(c["args"]), plain)
    vals = yaml.safe_load(values.read_text()) or {}
    assert s.namespaces == tuple(vals.get("watchNamespaces", []))
    assert s.bind_address == "0.0.0.0"  # reachable by the kubelet's liveness probe
    assert s.build.default_image == env["TFPS_DEFAULT_IMAGE"]
    assert s.leader_election == bool(vals.get("leaderElection", {}).get("enabled"))
    assert s.max_concurrent_passes == vals.get("operator", {}).get("workers", 32)
    assert s.build.operator_namespace_labels == {"kubernetes.io/metadata.name": "tfps-system"}
    scraper = vals.get("metrics", {}).get("trainer", {}).get("scraper", {})
    if scraper.get("enabled"):
        defaults = yaml.safe_load((CHART / "values.yaml").read_text())["metrics"]["trainer"]["scraper"]
        assert s.build.metrics_scraper == (
            scraper.get("namespaceLabels", defaults["namespaceLabels"]),
            scraper.get("podLabels", defaults["podLabels"]),
        )
    else:
        assert s.build.metrics_scraper is None
    gang = vals.get("gangScheduling", {})
    assert s.build.gang_scheduler_name == (gang.get("schedulerName") if gang.get("enabled") else None)
    assert s.build.kueue == bool(vals.get("kueue", {}).get("enabled"))
    relaxed = vals.get("jobPodSecurity", {}).get("relaxedNamespaces", [])
    assert s.build.relaxed_namespaces == frozenset(relaxed)
    assert ("TFPS_RELAXED_NAMESPACES" in env) == bool(relaxed)  # unset by default: no namespace relaxed


def _no_wildcards_or_secrets(rules: list[dict]):
    for g, r, v in rule_set(rules):
        assert "*" not in (g, r, v), f"wildcard in rule {(g, r, v)}"
        assert r not in ("secrets", "pods/exec", "pods/attach", "pods/portforward", "serviceaccounts/token"), r
        assert v not in ("escalate", "bind", "impersonate"), v


@needs_helm
def test_clusterwide_rbac_is_one_clusterrole():
    objs = objects(template(HELM, CHART / "ci" / "clusterwide-values.yaml").stdout)
    assert not by_kind(objs, "Role") and not by_kind(objs, "RoleBinding")
    role = one(objs, "ClusterRole")
    _no_wildcards_or_secrets(role["rules"])
    rules = rule_set(role["rules"])
    assert ("tfps.dev", "pstrainingjobs", "watch") in rules
    assert ("", "namespaces", "list") not in rules  # Kopf does not list namespaces when cluster-wide
    assert not any(r == "leases" for _, r, _ in rules)  # no leader election configured
    binding = one(objs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = one(objs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "tfps-system"}
    ]


@needs_helm
def test_namespaced_rbac_is_a_role_per_namespace_and_cluster_reads_only():
    objs = objects(template(HELM, CHART / "ci" / "namespaced-values.yaml").stdout)
    roles = by_kind(objs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    bindings = by_kind(objs, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for b in bindings:
        assert b["subjects"][0]["namespace"] == "tfps-system"
    cluster = rule_set(one(objs, "ClusterRole")["rules"])
    # Only reads, only of cluster-scoped things Kopf observes.
    assert cluster == {
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
    }
    clusterwide = rule_set(
        one(objects(template(HELM, CHART / "ci" / "clusterwide-values.yaml").stdout), "ClusterRole")["rules"]
    )
    for role in roles:
        _no_wildcards_or_secrets(role["rules"])
        # The same namespaced permissions as the cluster-wide mode, nothing more.
        assert rule_set(role["rules"]) == clusterwide - {
            ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
            ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
        }


@needs_helm
def test_leader_election_adds_exactly_the_lease_rules_in_the_release_namespace():
    base = objects(template(HELM).stdout)
    assert not [r for r in by_kind(base, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    objs = objects(template(HELM, CHART / "ci" / "custom-image-values.yaml", sets=["watchNamespaces={ml}"]).stdout)
    assert rule_set(one(objs, "ClusterRole")["rules"]) == rule_set(
        one(objects(template(HELM, sets=["watchNamespaces={ml}"]).stdout), "ClusterRole")["rules"]
    )
    (elect,) = [r for r in by_kind(objs, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    assert elect["metadata"]["namespace"] == "tfps-system"
    dep = one(objs, "Deployment")
    lease = container_env(dep)["TFPS_LEASE_NAME"]
    assert elect["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [lease],
            "verbs": ["get", "update"],
        },
    ]
    (binding,) = [b for b in by_kind(objs, "RoleBinding") if b["metadata"]["name"] == elect["metadata"]["name"]]
    assert binding["subjects"][0]["name"] == dep["spec"]["template"]["spec"]["serviceAccountName"]
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["strategy"]["type"] == "RollingUpdate"


@needs_helm
def test_more_than_one_replica_without_leader_election_is_refused():
    out = template(HELM, sets=["replicaCount=2"], check=False)
    assert out.returncode != 0 and "replicaCount > 1 needs leaderElection.enabled" in out.stderr
    assert one(objects(template(HELM).stdout), "Deployment")["spec"]["strategy"]["type"] == "Recreate"


@needs_helm
def test_gang_scheduling_adds_exactly_the_podgroup_rules_and_only_when_enabled():
    from .rbac import EXPECTED_GANG

    base = rule_set(one(objects(template(HELM).stdout), "ClusterRole")["rules"])
    assert not any(g == "scheduling.x-k8s.io" for g, _, _ in base)
    gang = rule_set(one(objects(template(HELM, CHART / "ci" / "gang-values.yaml").stdout), "ClusterRole")["rules"])
    assert gang - base == EXPECTED_GANG
    objs = objects(template(HELM, CHART / "ci" / "gang-values.yaml", sets=["watchNamespaces={ml}"]).stdout)
    (role,) = by_kind(objs, "Role")
    assert {t for t in rule_set(role["rules"]) if t[0] == "scheduling.x-k8s.io"} == EXPECTED_GANG
    assert "TFPS_GANG_SCHEDULER_NAME" not in container_env(one(objects(template(HELM).stdout), "Deployment"))


@needs_helm
def test_kueue_adds_exactly_the_workload_and_lookup_rules_and_only_when_enabled():
    from .rbac import EXPECTED_KUEUE, EXPECTED_KUEUE_CLUSTER

    base = rule_set(one(objects(template(HELM).stdout), "ClusterRole")["rules"])
    assert not any(g == "kueue.x-k8s.io" for g, _, _ in base)
    on = rule_set(one(objects(template(HELM, CHART / "ci" / "kueue-values.yaml").stdout), "ClusterRole")["rules"])
    assert on - base == EXPECTED_KUEUE | EXPECTED_KUEUE_CLUSTER
    objs = objects(template(HELM, CHART / "ci" / "kueue-values.yaml", sets=["watchNamespaces={ml}"]).stdout)
    (role,) = by_kind(objs, "Role")
    assert {t for t in rule_set(role["rules"]) if t[0] == "kueue.x-k8s.io"} == EXPECTED_KUEUE
    cluster = rule_set(one(objs, "ClusterRole")["rules"])
    assert {t for t in cluster if t[0] in ("kueue.x-k8s.io", "scheduling.k8s.io")} == EXPECTED_KUEUE_CLUSTER
    assert container_env(one(objs, "Deployment"))["TFPS_KUEUE"] == "true"
    assert "TFPS_KUEUE" not in container_env(one(objects(template(HELM).stdout), "Deployment"))


@needs_helm
def test_servicemonitor_only_when_enabled():
    assert not by_kind(objects(template(HELM).stdout), "ServiceMonitor")
    objs = objects(template(HELM, CHART / "ci" / "servicemonitor-values.yaml").stdout)
    sm = one(objs, "ServiceMonitor")
    svc = one(objs, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    # The Service reaches the operator pod's metrics port.
    dep = one(objs, "Deployment")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"


@needs_helm
def test_podmonitor_scrapes_the_progress_port_of_chiefs_and_evaluators_only_when_enabled():
    from tfps_operator.manifests.pods import desired_pods
    from tfps_operator.settings import BuildConfig

    assert not by_kind(objects(template(HELM).stdout), "PodMonitor")
    objs = objects(template(HELM, CHART / "ci" / "servicemonitor-values.yaml").stdout)
    pm = one(objs, "PodMonitor")
    assert pm["metadata"]["labels"]["release"] == "prometheus"
    assert pm["spec"]["namespaceSelector"] == {"any": True}
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    sel = pm["spec"]["selector"]
    (expr,) = sel["matchExpressions"]

    def selected(pod: dict) -> bool:
        labels = pod["metadata"]["labels"]
        return sel["matchLabels"].items() <= labels.items() and labels.get(expr["key"]) in expr["values"]

    # the operator's own pods: exactly the chief and the evaluator are selected, and they name the port
    from tfps_operator.tools.client import load_job

    job = load_job(
        {
            "apiVersion": "tfps.dev/v1alpha1",
            "kind": "PSTrainingJob",
            "metadata": {"name": "lin", "namespace": "ml", "uid": "u-1"},
            "spec": {
                "model": {"module": "tfps_trainer.examples.linear"},
                "training": {"steps": 100, "checkpoint": {"everySteps": 10}},
                "replicas": {"evaluator": {"replicas": 1}},
            },
        }
    )
    pods = list(desired_pods(job, BuildConfig()).values())
    chosen = {p["metadata"]["labels"]["tfps.dev/replica-type"] for p in pods if selected(p)}
    assert chosen == {"chief", "evaluator"}
    for p in pods:
        if selected(p):
            ports = {port["name"] for port in p["spec"]["containers"][0]["ports"]}
            assert endpoint["port"] in ports, ports
    watched = objects(
        template(HELM, CHART / "ci" / "servicemonitor-values.yaml", sets=["watchNamespaces={a,b}"]).stdout
    )
    assert one(watched, "PodMonitor")["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}


@needs_helm
def test_custom_image_values():
    objs = objects(template(HELM, CHART / "ci" / "custom-image-values.yaml").stdout)
    dep = one(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "registry.example.com/ml/tfps-operator:0.1.0-rc1" and c["imagePullPolicy"] == "Always"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    env = container_env(dep)
    assert env["TFPS_DEFAULT_IMAGE"] == "registry.example.com/ml/tfps-trainer:0.1.0-rc1"
    assert env["TFPS_LEADER_ELECTION"] == "true" and env["HTTPS_PROXY"] == "http://proxy.example.com:3128"
    assert "--verbose" in c["args"]
    assert one(objs, "ServiceAccount")["metadata"]["name"] == "tfps"
    # Default image tag is the chart's appVersion.
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    (c,) = one(objects(template(HELM).stdout), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert c["image"] == f"tfps-operator:{chart['appVersion']}"


@needs_helm
def test_notes_tell_what_to_do_next():
    out = run(
        [
            HELM,
            "install",
            "tfps-operator",
            str(CHART),
            "--dry-run=client",
            "-n",
            "tfps-system",
            "-f",
            str(CHART / "ci" / "namespaced-values.yaml"),
        ]
    ).stdout
    notes = out.split("NOTES:", 1)[1]
    assert "team-a, team-b" in notes
    assert "kubectl apply --server-side -f charts/tfps-operator/crds/" in notes
    assert "examples/quickstart.yaml" in notes


BAD_VALUES = [  # (--set, the JSON pointer helm's message must name)
    (["replicaCount=-1"], "at '/replicaCount'"),
    (["leaderElection.enabled=yes"], "at '/leaderElection/enabled'"),
    (["operator.logFormat=xml"], "at '/operator/logFormat'"),
    (["watchNamespaces={Team_A}"], "at '/watchNamespaces/0'"),
    (["imagee.tag=x"], "additional properties 'imagee' not allowed"),
    (["operator.healthPort=0"], "at '/operator/healthPort'"),
    (["trainerImage="], "at '/trainerImage'"),
    (["operator.extraEnv[0].name=TFPS_NAMESPACES"], "at '/operator/extraEnv/0/name'"),
    (["metrics.serviceMonitor.interval=often"], "at '/metrics/serviceMonitor/interval'"),
    (["image.pullPolicy=Sometimes"], "at '/image/pullPolicy'"),
    (["jobPodSecurity.relaxedNamespaces={Team_B}"], "at '/jobPodSecurity/relaxedNamespaces/0'"),
]


@needs_helm
@pytest.mark.parametrize(("sets", "field"), BAD_VALUES, ids=[s[0].split("=")[0] for s, _ in BAD_VALUES])
def test_schema_rejects_bad_values_naming_the_field(sets: list[str], field: str):
    proc = template(HELM, sets=sets, check=False)
    assert proc.returncode != 0, f"{sets} was accepted"
    assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr
    assert field in proc.stderr, proc.stderr


@needs_helm
def test_servicemonitor_without_service_fails_clearly():
    proc = template(HELM, sets=["metrics.serviceMonitor.enabled=true", "metrics.service.enabled=false"], check=False)
    assert proc.returncode != 0
    assert "metrics.serviceMonitor.enabled needs metrics.service.enabled" in proc.stderr


def _namespaced_rules_of(rendered: str) -> set:
    objs = objects(rendered)
    roles = by_kind(objs, "Role")
    return rule_set(roles[0]["rules"]) if roles else rule_set(one(objs, "ClusterRole")["rules"])


@needs_helm
def test_rendered_rules_are_the_operators_permission_table():
    """The chart grants exactly tests/chart/rbac.py's table (what the operator calls), which the
    cluster tests prove sufficient and minimal on a real API server."""
    from .rbac import EXPECTED_CLUSTER_SCOPED, EXPECTED_NAMESPACED

    rendered = template(HELM, CHART / "ci" / "namespaced-values.yaml").stdout
    ns_objs = objects(rendered)
    assert _namespaced_rules_of(rendered) == EXPECTED_NAMESPACED
    assert rule_set(one(ns_objs, "ClusterRole")["rules"]) == EXPECTED_CLUSTER_SCOPED["namespaced"]
    cw = rule_set(one(objects(template(HELM).stdout), "ClusterRole")["rules"])
    assert cw == EXPECTED_NAMESPACED | EXPECTED_CLUSTER_SCOPED["clusterwide"]


def test_install_doc_rbac_table_is_the_permission_table():
    from .rbac import EXPECTED_NAMESPACED

    doc = (ROOT / "docs" / "install.md").read_text()
    table = doc[doc.index("| API group | resource | verbs | why |") :]
    triples = set()
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        group, resources, verbs = (c.strip().strip("`") for c in line.strip("|").split("|")[:3])
        group = "" if group == "core" else group
        for r in resources.split(","):
            for v in verbs.split(","):
                triples.add((group, r.strip().strip("`"), v.strip()))
    assert triples == EXPECTED_NAMESPACED


@needs_helm
def test_too_old_kubernetes_is_refused_clearly():
    proc = run([HELM, "template", "x", str(CHART), "--kube-version", "1.29.0"], check=False)
    assert proc.returncode != 0 and "requires kubeVersion: >=1.30.0-0" in proc.stderr
    run([HELM, "template", "x", str(CHART), "--kube-version", "1.30.0"])
