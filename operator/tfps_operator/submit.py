"""`tfps submit job.yaml [--code DIR]`: validate, pack the code into a ConfigMap owned by the job, apply both.

Order, so that nothing is left behind: everything is checked first (the job with the API's rules, the
code's size); then the PSTrainingJob is applied (server-side apply), then the ConfigMap with an owner
reference to it (garbage-collected with the job). If the ConfigMap cannot be written, the job just
applied is deleted again. Pods that start before the ConfigMap exists wait for it (the kubelet retries
the volume).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import kopf

from .api.models import API_VERSION, GROUP, KIND, PLURAL, VERSION
from .codepack import CodePackError, pack
from .kube.client import ApiError, Kube
from .local.cli import InvalidInput, load_job

FIELD_MANAGER = "tfps-submit"
EXIT_FAILED = 1
EXIT_INVALID = 2


def code_configmap_name(job: str) -> str:
    return f"{job}-code"


def with_source(doc: dict[str, Any], configmap: str, items: list[dict[str, str]]) -> dict[str, Any]:
    """The job document with ``spec.model.source`` pointing at the packed code."""
    out = json.loads(json.dumps(doc))
    out["spec"]["model"]["source"] = {"configMap": configmap, "items": items}
    return out


async def _apply(kube: Kube, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
    return await kube.request(
        "PATCH",
        path,
        what=what,
        body=body,
        content_type="application/apply-patch+yaml",
        query=[("fieldManager", FIELD_MANAGER), ("force", "true"), ("fieldValidation", "Strict")],
    )


async def submit(doc: dict[str, Any], code: str | None, login: Any) -> str:
    """Apply the job (and its code); return a one-line summary. Raises ApiError, CodePackError."""
    name, ns = doc["metadata"]["name"], doc["metadata"].get("namespace", "default")
    doc = {**doc, "metadata": {**doc["metadata"], "namespace": ns}}
    codepack = None
    if code is not None:
        codepack = pack(code)
        doc = with_source(doc, code_configmap_name(name), codepack.items)
    kube = await Kube.connect(login)
    try:
        job_path = f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}/{name}"
        applied = await _apply(kube, job_path, doc, f"{KIND}/{name}")
        if codepack is None:
            return f"{KIND} {ns}/{name} applied"
        owner = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": name,
            "uid": applied["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
        cm = codepack.configmap(code_configmap_name(name), ns, owner)
        try:
            await _apply(
                kube,
                f"/api/v1/namespaces/{ns}/configmaps/{cm['metadata']['name']}",
                cm,
                f"ConfigMap/{code_configmap_name(name)}",
            )
        except ApiError:
            await kube.request("DELETE", job_path, what=f"{KIND}/{name}")
            raise
        binary = f", {len(codepack.binary_files)} binary" if codepack.binary_files else ""
        return (
            f"{KIND} {ns}/{name} applied; code: ConfigMap {code_configmap_name(name)} "
            f"({len(codepack.items)} files{binary}, {codepack.size / 1024:.1f} KiB) owned by it"
        )
    finally:
        await kube.close()


def main(args: argparse.Namespace) -> int:
    try:
        load_job(args.file)  # the API's rules, before anything is written
        doc = next(d for d in __import__("yaml").safe_load_all(Path(args.file).read_text()) if d is not None)
        if args.code is not None:
            pack(args.code)  # too large, empty: refused before anything is written
    except (InvalidInput, CodePackError) as exc:
        print(f"tfps submit: {exc}", file=sys.stderr)
        return EXIT_INVALID

    settings = kopf.OperatorSettings()

    def login() -> Any:  # $KUBECONFIG (or ~/.kube/config), read by Kopf's own reader
        return kopf.login_with_kubeconfig(settings=settings)

    try:
        print(asyncio.run(submit(doc, args.code, login)))
    except (ApiError, CodePackError, kopf.LoginError) as exc:
        print(f"tfps submit: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0
