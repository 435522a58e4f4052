"""`tfps submit --code DIR` against the real API server: the job and its code ConfigMap (owned by the
job, garbage-collected with it); code over the ConfigMap limit and invalid jobs leave nothing behind;
script-mode jobs and the pod template fields as the API server stores them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tfps_operator.api import models as m

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "seed"


def tfps(kubeconfig: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def job_file(tmp_path: Path, ns: str, name: str = "seed") -> Path:
    doc = yaml.safe_load((SEED / "job.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": ns}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_submit_with_code_applies_the_job_and_a_configmap_it_owns(
    k8s: Any, psjob_crd: Any, api_namespace: str, kubeconfig: str, tmp_path: Path, wait_until: Any
) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core, objs = client.CoreV1Api(k8s), client.CustomObjectsApi(k8s)
    res = tfps(kubeconfig, "submit", str(job_file(tmp_path, api_namespace)), "--code", str(SEED))
    assert res.returncode == 0, res.stderr
    assert "ConfigMap seed-code" in res.stdout and "owned by it" in res.stdout
    job = objs.get_namespaced_custom_object(m.GROUP, m.VERSION, api_namespace, m.PLURAL, "seed")
    source = job["spec"]["model"]["source"]
    assert source["configMap"] == "seed-code"
    paths = {i["path"]: i["key"] for i in source["items"]}
    assert "train.py" in paths and "job.yaml" in paths
    cm = core.read_namespaced_config_map("seed-code", api_namespace)
    assert cm.data[paths["train.py"]] == (SEED / "train.py").read_text()
    (owner,) = cm.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("PSTrainingJob", "seed", job["metadata"]["uid"])
    # submitting again is an apply: same objects, no error
    again = tfps(kubeconfig, "submit", str(job_file(tmp_path, api_namespace)), "--code", str(SEED))
    assert again.returncode == 0, again.stderr
    objs.delete_namespaced_custom_object(m.GROUP, m.VERSION, api_namespace, m.PLURAL, "seed")

    def collected() -> bool:
        try:
            core.read_namespaced_config_map("seed-code", api_namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(collected, timeout=60, what="the code ConfigMap garbage-collected with its job")


def test_code_over_the_configmap_limit_is_refused_and_nothing_is_written(
    k8s: Any, psjob_crd: Any, api_namespace: str, kubeconfig: str, tmp_path: Path
) -> None:
    from kubernetes import client

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('x')\n")
    (code / "weights.h5").write_bytes(os.urandom(1_200_000))
    res = tfps(kubeconfig, "submit", str(job_file(tmp_path, api_namespace, "toolarge")), "--code", str(code))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "over the ConfigMap limit of 1024 KiB" in res.stderr and "weights.h5" in res.stderr
    listed = client.CustomObjectsApi(k8s).list_namespaced_custom_object(m.GROUP, m.VERSION, api_namespace, m.PLURAL)
    assert [j["metadata"]["name"] for j in listed["items"] if j["metadata"]["name"] == "toolarge"] == []
    assert [
        c.metadata.name
        for c in client.CoreV1Api(k8s).list_namespaced_config_map(api_namespace).items
        if c.metadata.name == "toolarge-code"
    ] == []


def test_an_invalid_job_is_refused_before_anything_is_written(
    api_namespace: str, kubeconfig: str, tmp_path: Path
) -> None:
    path = job_file(tmp_path, api_namespace, "badjob")
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["replicas"]["worker"]["template"] = {"metadata": {"labels": {"tfps.dev/job-name": "other"}}}
    path.write_text(yaml.safe_dump(doc))
    res = tfps(kubeconfig, "submit", str(path), "--code", str(SEED))
    assert res.returncode == 2
    assert "spec.replicas.worker.template.metadata.labels: labels under tfps.dev/ are reserved" in res.stderr


def test_the_api_server_stores_a_script_mode_job_with_the_pod_template_fields(
    k8s: Any, psjob_crd: Any, api_namespace: str
) -> None:
    from kubernetes import client

    body = {
        "apiVersion": m.API_VERSION,
        "kind": m.KIND,
        "metadata": {"name": "script", "namespace": api_namespace},
        "spec": {
            "model": {"command": ["python", "train.py", "--dir", "$(TFPS_MODEL_DIR)"]},
            "replicas": {
                "ps": {
                    "replicas": 1,
                    "image": "reg/ps:1",
                    "template": {
                        "spec": {
                            "command": ["python", "ps.py"],
                            "args": ["--x"],
                            "serviceAccountName": "wi-sa",
                            "initContainers": [{"name": "fetch", "image": "busybox", "command": ["true"]}],
                            "topologySpreadConstraints": [
                                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
                            ],
                        }
                    },
                }
            },
        },
    }
    stored = client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        m.GROUP, m.VERSION, api_namespace, m.PLURAL, body, field_validation="Strict"
    )
    spec = stored["spec"]
    assert spec["training"]["batchSize"] == 32 and "steps" not in spec["training"]  # defaulted, steps optional
    ps = spec["replicas"]["ps"]
    assert ps["image"] == "reg/ps:1" and ps["template"]["spec"]["automountServiceAccountToken"] is False
    assert ps["template"]["spec"]["initContainers"][0]["command"] == ["true"]  # unknown fields of a Container kept
