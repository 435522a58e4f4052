"""Point Kueue's CRDs and webhook configurations at 127.0.0.1 for hack/cluster (stdlib only; run by
hack/lib/kueue.sh).

Input: the JSON that ``kubectl label --local -o json`` printed at build time for Kueue's CRDs
(config/components/crd/bases) and webhook configurations (config/components/webhook/manifests.yaml),
where every webhook points at an in-cluster Service. Output, two Lists:

- ``api.json``: the CRDs, with a conversion webhook for those named (the ones Kueue's kustomization
  patches: several served versions);
- ``webhooks.json``: the Mutating/ValidatingWebhookConfiguration renamed ``kueue-*``, keeping only the
  webhooks on Kueue's own API group (kueue.x-k8s.io), so no pod, batch Job or other kind ever waits on
  Kueue.

Every ``clientConfig`` is ``{url: https://127.0.0.1:PORT/<path>, caBundle: <the cluster CA>}``. Prints the
CRDs as ``crd/<name>`` words (for ``kubectl wait``).

usage: kueue_manifests.py PORT CA_FILE CRDS_JSON WEBHOOKS_JSON OUT_DIR [CONVERSION_CRD...]
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

GROUP = "kueue.x-k8s.io"
PREFIX = "kueue-"


def objects(text: str) -> list[dict[str, Any]]:
    """The objects of kubectl's JSON output: one object, a List, or several objects one after another."""
    decoder, pos, found = json.JSONDecoder(), 0, []
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        obj, pos = decoder.raw_decode(text, pos)
        found.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    return found


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def own_group_only(webhook: dict[str, Any]) -> bool:
    """True when every rule of the webhook is on Kueue's API group."""
    rules = webhook.get("rules") or []
    return bool(rules) and all(r.get("apiGroups") == [GROUP] for r in rules)


def crds(items: list[dict[str, Any]], client_config: dict[str, str], conversion: set[str]) -> dict[str, Any]:
    """The CRDs, a conversion webhook at ``/convert`` on the named ones."""
    out = [c for c in items if c.get("kind") == "CustomResourceDefinition"]
    missing = conversion - {c["metadata"]["name"] for c in out}
    if missing:
        raise SystemExit(f"kueue_manifests: no CRD named {sorted(missing)}")
    for crd in out:
        if crd["metadata"]["name"] in conversion:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {**client_config, "url": client_config["url"] + "/convert"},
                },
            }
    return as_list(out)


def webhooks(items: list[dict[str, Any]], client_config: dict[str, str]) -> dict[str, Any]:
    """The webhook configurations, reduced to Kueue's own group and pointed at 127.0.0.1."""
    out = []
    for cfg in items:
        if cfg.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        hooks = []
        for hook in cfg.get("webhooks") or []:
            if not own_group_only(hook):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {**client_config, "url": client_config["url"] + path}
            hooks.append(hook)
        if not hooks:
            raise SystemExit(f"kueue_manifests: {cfg['metadata']['name']} has no webhook on {GROUP}")
        cfg["metadata"] = {"name": PREFIX + cfg["metadata"]["name"], "labels": cfg["metadata"].get("labels", {})}
        cfg["webhooks"] = hooks
        out.append(cfg)
    if len(out) != 2:
        raise SystemExit(f"kueue_manifests: expected a mutating and a validating configuration, found {len(out)}")
    return as_list(out)


def main(argv: list[str]) -> None:
    if len(argv) < 6:
        raise SystemExit(__doc__.strip().splitlines()[-1] if __doc__ else "bad usage")
    port, ca_file, crds_json, webhooks_json, out_dir, conversion = argv[1], argv[2], argv[3], argv[4], argv[5], argv[6:]
    client_config = {
        "url": f"https://127.0.0.1:{int(port)}",
        "caBundle": base64.b64encode(Path(ca_file).read_bytes()).decode(),
    }
    out = Path(out_dir)
    api = crds(objects(Path(crds_json).read_text()), client_config, set(conversion))
    hooks = webhooks(objects(Path(webhooks_json).read_text()), client_config)
    (out / "api.json").write_text(json.dumps(api))
    (out / "webhooks.json").write_text(json.dumps(hooks))
    print(" ".join("crd/" + c["metadata"]["name"] for c in api["items"]))


if __name__ == "__main__":
    main(sys.argv)
