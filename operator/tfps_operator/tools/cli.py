"""`tfps`: the command line. Each subcommand lives in the module that owns it; this file only parses.

tfps operator   run the operator (tfps_operator.runner)
tfps run        run a job file locally (tfps_operator.tools.local)
tfps check      export pre-flight of a job file, before training (tfps_operator.tools.local.check)
tfps crd        print the generated CRD (tfps_operator.api.crd)
tfps validate   check job files client-side (tfps_operator.api.validate)
tfps submit     apply a job file to the cluster, with --code DIR as a ConfigMap (tfps_operator.tools.submit)
tfps convert    a Kubeflow TFJob as a PSTrainingJob in script mode (tfps_operator.tools.convert)
tfps migrate-storage   rewrite stored jobs at the CRD's storage version (tfps_operator.tools.migrate_storage)
tfps get|describe|wait|logs|artifacts   read and watch jobs on a cluster (tfps_operator.tools.client.cli_verbs)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    from .client.cli_verbs import cluster_args

    p = argparse.ArgumentParser(prog="tfps", description="TensorFlow parameter-server training on Kubernetes.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    op = sub.add_parser("operator", help="run the operator")
    op.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=None,
        help="watch this namespace (repeatable); default: all namespaces (env TFPS_NAMESPACES, comma-separated)",
    )
    op.add_argument(
        "--default-image", default=None, help="trainer image for jobs that set none (env TFPS_DEFAULT_IMAGE)"
    )
    op.add_argument("--log-format", choices=["plain", "json"], default=None, help="log format (env TFPS_LOG_FORMAT)")
    op.add_argument(
        "--health-port", type=int, default=None, help="liveness endpoint port (env TFPS_HEALTH_PORT, default 8080)"
    )
    op.add_argument(
        "--metrics-port", type=int, default=None, help="Prometheus metrics port (env TFPS_METRICS_PORT, default 9090)"
    )
    op.add_argument(
        "--leader-elect",
        action="store_true",
        help="elect a leader among replicas on a Lease; only the leader acts (env TFPS_LEADER_ELECTION=true)",
    )
    op.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    op.add_argument("--verbose", "-v", action="store_true")

    run = sub.add_parser("run", help="run a PSTrainingJob file locally, as processes on this machine")
    run.add_argument("file", help="PSTrainingJob YAML")
    run.add_argument(
        "--workdir",
        default=None,
        help="plays the job volume: files go under WORKDIR/<namespace>/<job>/ (default: ./tfps-work)",
    )
    run.add_argument("--steps", type=int, default=None, help="override spec.training.steps")
    run.add_argument(
        "--storage",
        default=None,
        metavar="URI",
        help="keep checkpoints, TensorBoard logs and exports in object storage (gs://BUCKET[/PREFIX]) instead "
        "of WORKDIR, as spec.storage.uri does; logs stay in WORKDIR",
    )
    run.add_argument("--no-export", action="store_true", help="train only")
    run.add_argument(
        "--resize",
        action="append",
        metavar="STEP=WORKERS[:PS]",
        help="rehearse a resize: once the lead reports STEP, resize the running job to WORKERS workers (and PS "
        "parameter servers) as the operator would; repeatable",
    )
    run.add_argument(
        "--code",
        default=None,
        metavar="DIR",
        help="the job's code (what spec.model.source ships on a cluster): every process runs in DIR, "
        "with DIR first on PYTHONPATH",
    )

    check = sub.add_parser(
        "check", help="convert and verify a job's model with fresh weights: what will export, what will fail"
    )
    check.add_argument("file", help="PSTrainingJob YAML")

    crd = sub.add_parser("crd", help="print the PSTrainingJob CustomResourceDefinition (YAML)")
    crd.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")
    crd.add_argument(
        "--storage-version",
        default=None,
        metavar="VERSION",
        help="the version etcd stores (default: the newest; an older one only to roll back, docs/install.md)",
    )

    val = sub.add_parser("validate", help="validate PSTrainingJob files with the same rules as the API server")
    val.add_argument("files", nargs="+", help="YAML files (may hold several documents)")
    val.add_argument(
        "--relaxed",
        action="store_true",
        help="for a namespace the operator relaxes: report only the pod security rules no namespace relaxes",
    )

    subm = sub.add_parser("submit", help="apply a PSTrainingJob to the cluster, its code from --code DIR")
    subm.add_argument("file", help="PSTrainingJob YAML")
    cluster_args(subm)
    subm.add_argument(
        "--code",
        default=None,
        metavar="DIR",
        help="pack DIR into a ConfigMap owned by the job (spec.model.source): on PYTHONPATH, the working directory",
    )

    conv = sub.add_parser("convert", help="print the PSTrainingJob (script mode) equivalent of a Kubeflow TFJob")
    conv.add_argument("file", help="TFJob YAML (kubeflow.org/v1)")
    conv.add_argument("--strict", action="store_true", help="exit 1 when any field could not be carried over")

    mig = sub.add_parser(
        "migrate-storage",
        help="rewrite every stored PSTrainingJob at the CRD's storage version, then narrow its storedVersions",
    )
    mig.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    mig.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    mig.add_argument("--dry-run", action="store_true", help="list what would be rewritten; write nothing")

    from .client.cli_verbs import register as register_job_verbs

    register_job_verbs(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "verb_main", None) is not None:
        from .client.cli_verbs import main as run_verb

        return run_verb(args)
    if args.command == "operator":
        from ..runner import main as run_operator

        return run_operator(args)
    if args.command == "run":
        from .local import main as run_local

        return run_local(args)
    if args.command == "check":
        from .local.check import main as check

        return check(args)
    if args.command == "crd":
        from ..api.crd import main as print_crd

        return print_crd(args)
    if args.command == "validate":
        from ..api.validate import main as validate

        return validate(args)
    if args.command == "submit":
        from .submit import main as submit

        return submit(args)
    if args.command == "convert":
        from .convert import main as convert

        return convert(args)
    if args.command == "migrate-storage":
        from .migrate_storage import main as migrate_storage

        return migrate_storage(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
