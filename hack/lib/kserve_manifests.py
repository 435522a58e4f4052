"""Render what KServe's controller manager needs in hack/cluster, from KServe's own module source.

Usage: kserve_manifests.py SRC WEBHOOK_PORT CA_CRT OUT_DIR

Writes into OUT_DIR (JSON lists for ``kubectl create -f``):
  api.json       every CRD of config/crd/full, the namespace "kserve", the inferenceservice-config ConfigMap
                 (config/configmap) with RawDeployment as the default deployment mode, no Ingress or Istio
                 VirtualService (neither exists here) and a host name per component that keeps the
                 InferenceService's name and its namespace in separate DNS labels; KServe's ClusterRole
                 (config/rbac/role.yaml) bound to the client-cert user system:kserve (the manager's kubeconfig)
  webhooks.json  config/webhook/manifests.yaml with each ``clientConfig.service`` rewritten to
                 ``url: https://127.0.0.1:PORT/<path>`` and the cluster CA as caBundle
  runtimes.json  the ClusterServingRuntimes kserve-tensorflow-serving and kserve-tritonserver
                 (config/runtimes) with the images config/runtimes/kustomization.yaml names
  crds.txt       the CRD names, one a line
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "kserve"
USER = "system:kserve"
RUNTIMES = ("kserve-tensorflow-serving", "kserve-tritonserver")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _config_map(src: Path) -> dict[str, Any]:
    (cm,) = _docs(src / "config/configmap/inferenceservice.yaml")
    data = cm["data"]
    data.pop("_example", None)
    deploy = json.loads(data["deploy"])
    deploy["defaultDeploymentMode"] = "RawDeployment"
    data["deploy"] = json.dumps(deploy)
    ingress = json.loads(data["ingress"])
    # KServe names each component's host from this template even when it creates no Ingress, and refuses a
    # label over 63 characters: upstream's "{{ .Name }}-{{ .Namespace }}" caps name + "-predictor-" +
    # namespace at 63 together (the tests' namespaces are long); one label each keeps them apart.
    ingress.update(
        disableIngressCreation=True,
        disableIstioVirtualHost=True,
        domainTemplate="{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}",
    )
    data["ingress"] = json.dumps(ingress)
    cm["metadata"] = {"name": cm["metadata"]["name"], "namespace": NAMESPACE}
    return cm


def _rbac(src: Path) -> list[dict[str, Any]]:
    roles = [d for d in _docs(src / "config/rbac/role.yaml") if d["kind"] == "ClusterRole"]
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"tfps-hack-{r['metadata']['name']}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": r["metadata"]["name"]},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        }
        for r in roles
    ]
    return roles + bindings


def _webhooks(src: Path, port: int, ca: str) -> list[dict[str, Any]]:
    out = []
    for cfg in _docs(src / "config/webhook/manifests.yaml"):
        cfg["metadata"] = {"name": cfg["metadata"]["name"]}
        for hook in cfg["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
        out.append(cfg)
    return out


def _runtimes(src: Path) -> list[dict[str, Any]]:
    kust = yaml.safe_load((src / "config/runtimes/kustomization.yaml").read_text())
    images = {i["name"]: f"{i['newName']}:{i['newTag']}" for i in kust.get("images", [])}
    out = []
    for name in RUNTIMES:
        (rt,) = _docs(src / f"config/runtimes/{name}.yaml")
        for c in rt["spec"]["containers"]:
            ref = c["image"].split(":", 1)[0]
            if ref not in images:
                sys.exit(f"{name}: image {c['image']} not named in config/runtimes/kustomization.yaml")
            c["image"] = images[ref]
        out.append(rt)
    return out


def main() -> None:
    src, port, ca_crt, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    ca = base64.b64encode(ca_crt.read_bytes()).decode()
    crds = [d for p in sorted((src / "config/crd/full").glob("serving.kserve.io_*.yaml")) for d in _docs(p)]
    for c in crds:
        c["metadata"].setdefault("labels", {})["app.kubernetes.io/part-of"] = "tfps-hack-kserve"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    (out / "api.json").write_text(json.dumps(_list([*crds, ns, _config_map(src), *_rbac(src)])))
    (out / "webhooks.json").write_text(json.dumps(_list(_webhooks(src, port, ca))))
    (out / "runtimes.json").write_text(json.dumps(_list(_runtimes(src))))
    (out / "crds.txt").write_text("".join(c["metadata"]["name"] + "\n" for c in crds))


if __name__ == "__main__":
    main()
