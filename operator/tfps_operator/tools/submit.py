"""`tfps submit job.yaml [--code DIR] [--kubeconfig F] [--context C] [-n NS]`: the Python client's
:meth:`~.client.jobs.TFPSClient.submit` with server-side apply, so that submitting a job again updates it.

Everything is checked first (the job with the API's rules, the code's size); then the PSTrainingJob is
applied, then the ConfigMap of its code with an owner reference to it (garbage-collected with the job). If
the ConfigMap cannot be written, a job this command created is deleted again. Pods that start before the
ConfigMap exists wait for it (the kubelet retries the volume).
"""

from __future__ import annotations

import argparse
import sys

from . import codepack
from .client.errors import ClientError, InvalidJob
from .jobfile import refusal_text


def main(args: argparse.Namespace) -> int:
    from .client.jobs import TFPSClient  # the kubernetes library: loaded only when submitting

    try:
        client = TFPSClient(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)
        job = client.submit(args.file, code=args.code, apply=True)
    except InvalidJob as exc:
        print(f"tfps submit: {refusal_text(exc)}", file=sys.stderr)
        return exc.exit_code
    except ClientError as exc:
        print(f"tfps submit: {exc}", file=sys.stderr)
        return exc.exit_code
    ns, name = job.metadata.namespace, job.metadata.name
    line = f"PSTrainingJob {ns}/{name} applied"
    if args.code is not None and job.spec.model.source is not None:
        files = len(job.spec.model.source.items or [])
        line += f"; code: ConfigMap {codepack.configmap_name(name)} ({files} files) owned by it"
    print(line)
    return 0
