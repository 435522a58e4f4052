"""Rewrite Kueue's webhook configurations for hack/cluster (stdlib only; run by hack/lib/kueue.sh).

Reads the JSON that ``kubectl label --local -f config/components/webhook/manifests.yaml -o json`` prints
(Kueue's Mutating/ValidatingWebhookConfiguration, every webhook pointing at an in-cluster Service) and
prints a List of the same two configurations, renamed ``kueue-*``, where

- only the webhooks on Kueue's own API group (kueue.x-k8s.io) are kept: the ones for pods, batch Jobs,
  Deployments and other job kinds are left out, so no object outside Kueue's API ever waits on Kueue;
- each ``clientConfig`` is ``{url: https://127.0.0.1:PORT/<path>, caBundle: <the cluster CA>}``.

usage: kueue_webhooks.py PORT CA_FILE < manifests.json > webhooks.json
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

GROUP = "kueue.x-k8s.io"
PREFIX = "kueue-"


def own_group_only(webhook: dict[str, Any]) -> bool:
    """True when every rule of the webhook is on Kueue's API group."""
    rules = webhook.get("rules") or []
    return bool(rules) and all(r.get("apiGroups") == [GROUP] for r in rules)


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


def rewrite(items: list[dict[str, Any]], port: int, ca_bundle: str) -> dict[str, Any]:
    """The List of webhook configurations to apply, pointed at 127.0.0.1:port."""
    out = []
    for cfg in items:
        if cfg.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        hooks = []
        for hook in cfg.get("webhooks") or []:
            if not own_group_only(hook):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            hooks.append(hook)
        if not hooks:
            raise SystemExit(f"kueue_webhooks: {cfg['metadata']['name']} has no webhook on {GROUP}")
        cfg["metadata"] = {"name": PREFIX + cfg["metadata"]["name"], "labels": cfg["metadata"].get("labels", {})}
        cfg["webhooks"] = hooks
        out.append(cfg)
    if len(out) != 2:
        raise SystemExit(f"kueue_webhooks: expected a mutating and a validating configuration, found {len(out)}")
    return {"apiVersion": "v1", "kind": "List", "items": out}


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit("usage: kueue_webhooks.py PORT CA_FILE < manifests.json > webhooks.json")
    port = int(argv[1])
    with open(argv[2], "rb") as f:
        ca_bundle = base64.b64encode(f.read()).decode()
    json.dump(rewrite(objects(sys.stdin.read()), port, ca_bundle), sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
