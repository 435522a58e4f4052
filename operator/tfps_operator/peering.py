"""Kopf peering resources for ``tfps operator --peering NAME`` (leader election between replicas).

Kopf keeps each replica's heartbeat and priority in the status of a peering object and pauses every
replica but the highest-priority one. The CRDs and the object must exist before the operator starts::

    python -m tfps_operator.peering tfps                      # cluster-wide operator
    python -m tfps_operator.peering tfps -n team-a -n team-b  # operator serving these namespaces
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import yaml

GROUP = "kopf.dev"


def _crd(kind: str, plural: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "scope": scope,
            "group": GROUP,
            "names": {"kind": kind, "plural": plural, "singular": plural[:-1]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                        }
                    },
                }
            ],
        },
    }


def manifests(name: str, namespaces: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The peering CRDs plus the peering object(s) NAME for this operator's scope."""
    docs = [
        _crd("ClusterKopfPeering", "clusterkopfpeerings", "Cluster"),
        _crd("KopfPeering", "kopfpeerings", "Namespaced"),
    ]
    if namespaces:
        docs += [
            {"apiVersion": f"{GROUP}/v1", "kind": "KopfPeering", "metadata": {"name": name, "namespace": ns}}
            for ns in namespaces
        ]
    else:
        docs.append({"apiVersion": f"{GROUP}/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}})
    return docs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tfps_operator.peering", description=__doc__.splitlines()[0])
    p.add_argument("name", help="peering name (the operator's --peering)")
    p.add_argument(
        "--namespace", "-n", action="append", default=[], help="served namespace (repeatable); none: cluster-wide"
    )
    p.add_argument(
        "--only",
        choices=["crds", "objects"],
        default=None,
        help="print only the CRDs or only the peering objects: on a cluster that never had the CRDs, "
        "apply the CRDs and wait for them to be Established before the objects",
    )
    args = p.parse_args(argv)
    docs = manifests(args.name, args.namespace)
    if args.only:
        docs = [d for d in docs if (d["kind"] == "CustomResourceDefinition") == (args.only == "crds")]
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
