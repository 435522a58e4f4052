"""``tfps get|describe|wait|logs|artifacts``: the job-aware verbs, on :class:`~.jobs.TFPSClient`.

They take ``--kubeconfig``, ``--context`` and ``-n/--namespace`` like kubectl, print tables (or the
objects with ``-o json|yaml``), and exit with the codes of :mod:`.errors` (0 ok, 1 error, 2 bad input,
3 not found, 4 timeout, 5 job failed, 6 no export, 7 checksum mismatch).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ...api.models import ROLES


def cluster_args(p: argparse.ArgumentParser) -> None:
    """``--kubeconfig``, ``--context`` and ``-n/--namespace``, as kubectl takes them (every cluster verb)."""
    p.add_argument(
        "--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"
    )
    p.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    p.add_argument("--namespace", "-n", default=None, help="namespace (default: the context's, else default)")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", "-o", choices=["table", "json", "yaml"], default="table", help="output format")


def register(sub: Any) -> None:
    """Add the verbs to ``tfps``'s subparsers; each sets ``verb_main``."""
    get = sub.add_parser(
        "get", help="list jobs, or show one, with progress (step/target, loss, steps/s, checkpoint age)"
    )
    get.add_argument("name", nargs="?", help="job name (default: every job in the namespace)")
    get.add_argument("--all-namespaces", "-A", action="store_true", help="jobs of every namespace")
    cluster_args(get)
    _output(get)
    get.set_defaults(verb_main=_get)

    desc = sub.add_parser("describe", help="one job: conditions, progress, children and events")
    desc.add_argument("name")
    cluster_args(desc)
    _output(desc)
    desc.set_defaults(verb_main=_describe)

    wait = sub.add_parser("wait", help="wait until a job finished (exit 0 Succeeded, 5 Failed, 4 timeout), or --for")
    wait.add_argument("name")
    wait.add_argument(
        "--for",
        dest="for_",
        default=None,
        metavar="phase=P|condition=C[=STATUS]",
        help="what to wait for, e.g. phase=Running, condition=Stalled, condition=ExportComplete=False",
    )
    wait.add_argument("--timeout", type=_seconds, default=600.0, help="seconds (or 30s, 5m, 1h; default 10m)")
    cluster_args(wait)
    _output(wait)
    wait.set_defaults(verb_main=_wait)

    logs = sub.add_parser("logs", help="the trainer log of one pod of a job (default: its lead, the chief or worker 0)")
    logs.add_argument("name")
    logs.add_argument("--role", choices=ROLES, default=None, help="default: the lead (the chief, else worker)")
    logs.add_argument("--index", type=int, default=0, help="replica index (default 0)")
    logs.add_argument("--follow", "-f", action="store_true", help="stream until the container ends")
    logs.add_argument("--tail", type=int, default=None, help="only the last N lines")
    logs.add_argument("--previous", "-p", action="store_true", help="the previous container's log")
    cluster_args(logs)
    logs.set_defaults(verb_main=_logs)

    art = sub.add_parser(
        "artifacts",
        help="a job's export: formats, sizes, verification figures, lineage; --download copies it (and its manifest)",
    )
    art.add_argument("name")
    art.add_argument(
        "--download",
        metavar="DIR",
        default=None,
        help="copy exports/<step>/ into DIR/<step>/ through a short-lived pod, checked against manifest.json",
    )
    art.add_argument("--step", default="latest", help="export step (default: latest complete)")
    art.add_argument("--open", action="store_true", help="print the path of the export's report.html")
    art.add_argument("--image", default=None, help="image of the reader pod (default: the job's trainer image)")
    art.add_argument("--timeout", type=_seconds, default=300.0, help="download timeout in seconds (default 5m)")
    cluster_args(art)
    _output(art)
    art.set_defaults(verb_main=_artifacts)

    tb = sub.add_parser(
        "tensorboard",
        help="TensorBoard over jobs' event files: on a cluster through a short-lived pod (Ctrl-C deletes it), "
        "or locally (--workdir of `tfps run`, directories, gs:// URIs)",
    )
    tb.add_argument("names", nargs="+", metavar="NAME", help="job names; or local directories / gs:// URIs")
    tb.add_argument("--workdir", default=None, help="NAMEs are jobs `tfps run` ran in this work directory")
    tb.add_argument("--port", type=int, default=0, help="local port of the URL (default: a free one)")
    tb.add_argument("--image", default=None, help="image of the pod (default: the job's trainer image)")
    tb.add_argument(
        "--lifetime", type=_seconds, default=4 * 3600.0, help="the pod's deadline (default 4h), even if tfps dies"
    )
    tb.add_argument("--timeout", type=_seconds, default=300.0, help="how long to wait for TensorBoard (default 5m)")
    cluster_args(tb)
    tb.set_defaults(verb_main=_tensorboard)


def _tensorboard(args: argparse.Namespace) -> int:
    from .tensorboard import main as tensorboard

    return tensorboard(args, _client)


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        return float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 90, 90s, 5m or 1h)") from None


def main(args: argparse.Namespace) -> int:
    """Run a verb; a :class:`~.errors.ClientError` becomes ``tfps <verb>: message`` on stderr and its exit code."""
    from .errors import ClientError

    try:
        return int(args.verb_main(args) or 0)
    except ClientError as e:
        print(f"tfps {args.command}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


def _client(args: argparse.Namespace) -> Any:
    from .jobs import TFPSClient

    return TFPSClient(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)


def _dump(obj: Any, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(obj, indent=2, default=str))
    else:
        print(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False), end="")


def _get(args: argparse.Namespace) -> int:
    from .render import get_table

    c = _client(args)
    jobs = [c.get(args.name)] if args.name else c.list(all_namespaces=args.all_namespaces)
    if args.output != "table":
        wire = [j.to_wire() for j in jobs]
        _dump(wire[0] if args.name else {"apiVersion": "v1", "kind": "List", "items": wire}, args.output)
    elif not jobs:
        where = "any namespace" if args.all_namespaces else f'namespace "{c.namespace}"'
        print(f"No PSTrainingJobs in {where}.", file=sys.stderr)
    else:
        print(get_table(jobs, namespace=args.all_namespaces))
    return 0


def _describe(args: argparse.Namespace) -> int:
    from .render import describe

    c = _client(args)
    job = c.get(args.name)
    children, events = c.children(args.name), c.events(args.name)
    if args.output != "table":
        _dump(
            {
                "job": job.to_wire(),
                "children": [vars(k) for k in children],
                "events": [{**vars(e), "time": e.time.isoformat() if e.time else None} for e in events],
            },
            args.output,
        )
    else:
        print(describe(job, children, events))
    return 0


def _parse_for(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    kind, _, rest = text.partition("=")
    if kind == "phase" and rest:
        return {"phase": rest.split(",")}
    if kind == "condition" and rest:
        cond, _, status = rest.partition("=")
        if status and status not in ("True", "False", "Unknown"):
            raise _usage(f"--for {text}: the status must be True, False or Unknown")
        return {"condition": cond, "condition_status": status or "True"}
    raise _usage(f"--for {text}: use phase=PHASE or condition=TYPE[=STATUS]")


def _usage(message: str) -> Exception:
    from .errors import ClientError

    e = ClientError(message)
    e.exit_code = 2
    return e


def _wait(args: argparse.Namespace) -> int:
    wanted = _parse_for(args.for_)
    c = _client(args)
    job = c.wait(args.name, timeout=args.timeout, **wanted)
    st = job.status
    if args.output != "table":
        _dump(job.to_wire(), args.output)
    else:
        print(f"pstrainingjob/{args.name}: {st.phase if st else '-'}")
    return 5 if not args.for_ and st and st.phase == "Failed" else 0


def _logs(args: argparse.Namespace) -> int:
    c = _client(args)
    out = c.logs(
        args.name, role=args.role, index=args.index, follow=args.follow, tail_lines=args.tail, previous=args.previous
    )
    if isinstance(out, str):
        sys.stdout.write(out)
    else:
        for line in out:
            sys.stdout.write(line)
            sys.stdout.flush()
    return 0


def _artifacts(args: argparse.Namespace) -> int:
    import json as _json

    from .artifacts import MANIFEST, REPORT
    from .errors import NoExports
    from .render import lineage_lines, manifest_table, status_artifacts_table

    c = _client(args)
    job = c.get(args.name)
    ex = job.status.export if job.status else None
    if ex is None or ex.step is None:
        raise NoExports(
            f'pstrainingjob "{args.name}" in namespace "{c.namespace}" has no export '
            f"(phase {job.status.phase if job.status else 'unset'})"
        )
    if args.download:
        step: Any = int(args.step) if str(args.step).isdigit() else "latest"
        where = c.download_artifacts(args.name, Path(args.download), step=step, image=args.image, timeout=args.timeout)
        manifest = _json.loads((where / MANIFEST).read_text())
        if args.output != "table":
            _dump(manifest, args.output)
        else:
            print(manifest_table(manifest))
            print("\n".join(lineage_lines(manifest)))
            print(f"downloaded to {where} (every file matches {MANIFEST})")
        if args.open:
            report = where / REPORT
            print(report if report.exists() else f"{report} (missing: the export predates report.html)")
        return 0
    if args.output != "table":
        _dump(ex.to_wire(), args.output)
    else:
        print(status_artifacts_table(job))
    if args.open:
        root = f"{job.spec.storage.mount_path}/{job.metadata.namespace}/{job.metadata.name}"
        print(f"{root}/{ex.path}/{REPORT} (on the job's volume; --download DIR --open for a local copy)")
    return 0


VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "get": _get,
    "describe": _describe,
    "wait": _wait,
    "logs": _logs,
    "artifacts": _artifacts,
}
