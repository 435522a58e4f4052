"""hack/kind-e2e's parts that run without Docker: argument handling, the prerequisite check, the
kind config and CI workflow, and (cluster tier) the manifests it applies, dry-run on a real API server.
The e2e itself needs Docker and kind; .github/workflows/kind-e2e.yaml runs it on a hosted runner."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from .helpers import ROOT, objects

SCRIPT = ROOT / "hack" / "kind-e2e"


def e2e(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}, cwd="/"
    )


def test_help():
    out = e2e("--help")
    assert out.returncode == 0
    for opt in ("--cluster-name", "--keep", "--timeout", "--print-manifests", "--help"):
        assert opt in out.stdout
    assert e2e("-h").stdout == out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "unknown argument: --bogus"),
        (["--cluster-name"], "--cluster-name needs a value"),
        (["--cluster-name", "Bad_Name"], "must be a lowercase DNS label"),
        (["--cluster-name=" + "x" * 41], "must be a lowercase DNS label"),
        (["--timeout", "soon"], "--timeout: 'soon' must be a positive number"),
        (["--timeout=0"], "--timeout: '0' must be a positive number"),
    ],
)
def test_bad_arguments_exit_2_with_usage(args: list[str], message: str):
    out = e2e(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "usage: hack/kind-e2e" in out.stderr


def test_missing_tools_exit_2_naming_them():
    # docker and kubectl present (whatever this machine has), kind and helm missing
    present = {"DOCKER": "/bin/true", "KUBECTL": "/bin/true"}
    out = e2e("--cluster-name", "x", env={**present, "KIND": "/nonexistent/kind", "HELM": "/nonexistent/helm"})
    assert out.returncode == 2
    assert "not found: /nonexistent/kind /nonexistent/helm" in out.stderr
    assert "This machine cannot run kind" in out.stderr


def test_unreachable_docker_daemon_exits_2():
    """Every tool present, but no Docker daemon (this machine): a clear message, exit 2, nothing created."""
    docker = subprocess.run(["docker", "info"], capture_output=True, timeout=30) if _which("docker") else None
    if docker is not None and docker.returncode == 0:
        pytest.skip("a Docker daemon is reachable here")
    # A docker that cannot reach a daemon, whether or not a docker client is installed.
    fake = "/bin/false" if docker is None else "docker"
    out = e2e(env={"DOCKER": fake, "KIND": "/bin/true", "KUBECTL": "/bin/true", "HELM": "/bin/true"})
    assert out.returncode == 2
    assert "the Docker daemon is not reachable" in out.stderr
    assert "creating kind cluster" not in out.stdout


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def test_script_paths_exist():
    """Every repository path the script uses is there."""
    text = SCRIPT.read_text()
    paths = set(re.findall(r"\$REPO/([\w./-]+)", text)) - {".kind-e2e", ".kind-e2e/artifacts", ".kind-e2e/kubeconfig-"}
    assert {
        "kind-config.yaml",
        "operator/Dockerfile",
        "trainer_image/Dockerfile",
        "charts/tfps-operator",
        "examples/quickstart.yaml",
    } <= paths
    for p in paths:
        if not p.startswith(".kind-e2e"):
            assert (ROOT / p.rstrip("/")).exists(), p


def test_kind_config():
    cfg = yaml.safe_load((ROOT / "kind-config.yaml").read_text())
    assert cfg["kind"] == "Cluster" and cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    # One node: the ReadWriteOnce PVC the e2e creates must be mountable by every pod of the job.
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane"]
    assert cfg["networking"]["apiServerAddress"] == "127.0.0.1"


def test_workflow_runs_the_script_on_a_docker_runner():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "kind-e2e.yaml").read_text())
    (job,) = wf["jobs"].values()
    assert job["runs-on"].startswith("ubuntu")  # hosted Linux runners have Docker
    runs = [s.get("run", "") for s in job["steps"]]
    assert any(r.startswith("hack/kind-e2e") for r in runs)
    uses = " ".join(s.get("uses", "") for s in job["steps"])
    assert "kind-action" in uses and "setup-helm" in uses and "setup-kubectl" in uses


@pytest.mark.cluster
def test_applied_manifests_pass_server_dry_run(cluster, kubectl, wait_until):
    """`--print-manifests` (namespace, PVC, the quickstart job pointed at the PVC, the verifier pod)
    is accepted by the real API server, CRD validation and CEL rules included."""
    from support.crd import install_crd

    install_crd(str(cluster.kubeconfig))
    out = subprocess.run(
        [str(SCRIPT), "--print-manifests"], capture_output=True, text=True, timeout=60, env=cluster.env, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    docs = objects(out.stdout)
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Namespace", "PersistentVolumeClaim", "PSTrainingJob", "Pod"]
    ns = docs[0]["metadata"]["name"]
    job = docs[2]
    assert job["metadata"]["namespace"] == ns
    assert job["spec"]["storage"] == {"claimName": docs[1]["metadata"]["name"]}
    assert docs[3]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == docs[1]["metadata"]["name"]
    # Namespaced objects need their namespace to exist for a server-side dry run.
    kubectl("create", "namespace", ns, check=False)
    try:
        wait_until(
            lambda: kubectl("get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0,
            timeout=30,
            what=f"default ServiceAccount in {ns}",
        )
        res = kubectl("apply", "--dry-run=server", "-f", "-", input=out.stdout)
        assert res.stdout.count("(server dry run)") == len(docs), res.stdout
    finally:
        kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_helm_values_the_script_sets_exist_in_the_chart():
    """The script's `--set key=...` pass the chart's schema (no misspelled key silently ignored)."""
    from .helpers import find_helm, template

    helm = find_helm()
    if helm is None:
        pytest.skip("helm not built yet: `hack/cluster up` builds it")
    keys = re.findall(r"--set ([\w.]+)=", SCRIPT.read_text())
    assert {"image.repository", "image.tag", "image.pullPolicy", "trainerImage"} <= set(keys)
    samples = {"image.pullPolicy": "Never", "operator.logFormat": "plain"}
    out = template(helm, sets=[f"{k}={samples.get(k, 'tfps-e2e')}" for k in keys])
    dep = next(d for d in objects(out.stdout) if d["kind"] == "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "tfps-e2e:tfps-e2e" and c["imagePullPolicy"] == "Never"
