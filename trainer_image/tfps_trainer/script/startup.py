"""Failures of a script-mode program that every attempt would repeat, read from its last traceback.

A program that cannot import a module, does not compile, rejects its command line or cannot find a file its
command line names fails the same way on every attempt: restarting its pods costs a back-off and a restart of
every replica and ends in ``BackoffLimitExceeded`` all the same. Such a failure ends the replica with
:data:`~tfps_wire.exitcodes.CANNOT_RUN` (permanent) and a hint that names the module or the file and how to
provide it.

What counts is what fails, not when (TF-free, no clock):

* a missing module (``ModuleNotFoundError``/``ImportError``) raised while the program's modules are
  imported: every frame of its traceback is module level (``<module>``) or the import machinery's. The same
  error from inside a function (a lazy import during training) keeps the usual rules;
* a ``SyntaxError`` (or ``IndentationError``, ``TabError``) in the program's own source, at import;
* a usage error: argparse's ``usage:`` and ``PROG: error:`` lines with exit code 2, absl's ``FATAL Flags
  parsing error``;
* a missing file named on the command line: Python's ``can't open file``, or a ``FileNotFoundError`` /
  TensorFlow ``NotFoundError`` for a path that is one of the program's arguments (or a ``--flag=`` value).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

TRACEBACK_HEAD = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+, in (?P<name>\S+)')
_IMPORT_MACHINERY = ("<frozen importlib._bootstrap", "importlib/__init__.py", "<frozen runpy>", "/runpy.py")
_MISSING_MODULE = re.compile(
    r"^(?:\w+\.)*(?P<exc>ModuleNotFoundError|ImportError): (?:No module named '?(?P<mod>[\w.]+)'?|(?P<msg>.*))$"
)
_SYNTAX = re.compile(r"^(?:\w+\.)*(?P<exc>SyntaxError|IndentationError|TabError): (?P<msg>.*)$")
_SYNTAX_AT = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)\s*$')
_CANNOT_OPEN = re.compile(r"can't open file '(?P<file>[^']*)': \[Errno 2\] No such file or directory")
_NOT_FOUND = re.compile(
    r"^(?:\w+\.)*(?:FileNotFoundError: \[Errno 2\] No such file or directory: '(?P<py>[^']*)'|"
    r"NotFoundError: (?P<tf>[^;\s]+)(?:;| ).*)$"
)
_USAGE = re.compile(r"^usage: ", re.IGNORECASE)
_ARGPARSE_ERROR = re.compile(r"^\S+: error: (?P<msg>.*)$")
_ABSL_FLAGS = re.compile(r"FATAL Flags parsing error: (?P<msg>.*)$")

SHIP_CODE = (
    "ship it with the job's code (tfps run --code DIR; on a cluster, tfps submit --code DIR packs it with the job)"
)
BUILD_IMAGE = (
    "or build an image FROM the trainer image with it installed (RUN pip install ...) and set it as the replicas' image"
)


@dataclass(frozen=True)
class StartupFailure:
    """A failure every attempt repeats: what it is (``missing-module``, ``syntax``, ``usage``,
    ``missing-file``), what it names, and the hint for the reason."""

    kind: str
    subject: str
    hint: str


def last_traceback(lines: Sequence[str]) -> list[str]:
    """The lines from the last ``Traceback (most recent call last):`` on (all of them when there is none)."""
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == TRACEBACK_HEAD:
            return list(lines[i:])
    return list(lines)


def at_import(traceback: Sequence[str]) -> bool:
    """Whether every frame of ``traceback`` runs at module level or in the import machinery."""
    frames = [m for line in traceback if (m := _FRAME.match(line))]
    return all(m["name"] == "<module>" or any(x in m["file"] for x in _IMPORT_MACHINERY) for m in frames)


def argument_paths(argv: Sequence[str]) -> set[str]:
    """The program's arguments that could name a file: each argument, and the value of each ``--flag=value``."""
    paths = set()
    for arg in argv[1:]:
        paths.add(arg)
        if arg.startswith("-") and "=" in arg:
            paths.add(arg.split("=", 1)[1])
    return {p for p in paths if p and not p.startswith("-")}


def classify(lines: Sequence[str], argv: Sequence[str], code: int) -> StartupFailure | None:
    """The failure every attempt would repeat that the program's output ``lines`` show (it exited with
    ``code``, non-zero), or None."""
    tb = last_traceback([line.rstrip("\n") for line in lines])
    last = next((line.strip() for line in reversed(tb) if line.strip()), "")
    if (m := _MISSING_MODULE.match(last)) and at_import(tb):
        mod = m["mod"] or ""
        what = f"module {mod!r}" if mod else f"an import ({m['msg'].strip()[:160]})"
        top = mod.split(".")[0]
        return StartupFailure(
            "missing-module",
            mod or m["msg"].strip()[:160],
            f"the program imports {what}, which this image does not have: {SHIP_CODE}, {BUILD_IMAGE}"
            + (f" (for example pip install {top})" if top else ""),
        )
    if (m := _SYNTAX.match(last)) and at_import(tb):
        where = next((f"{s['file']}:{s['line']}" for line in tb if (s := _SYNTAX_AT.match(line))), "its source")
        return StartupFailure(
            "syntax",
            where,
            f"the program's source does not compile ({m['exc']} at {where}: {m['msg'][:160]}): fix it and "
            "submit the job again",
        )
    for line in tb:
        if m := _CANNOT_OPEN.search(line):
            return StartupFailure(
                "missing-file",
                m["file"],
                f"the program file {m['file']!r} does not exist where the command names it: {SHIP_CODE}, or "
                "correct the command's path",
            )
    if code == 2 and any(_USAGE.match(line) for line in tb):
        err = next((m["msg"] for line in tb if (m := _ARGPARSE_ERROR.match(line.strip()))), None)
        if err is not None:
            return StartupFailure(
                "usage", err[:200], f"the program rejected its command line ({err[:200]}): correct the arguments"
            )
    for line in tb:
        if m := _ABSL_FLAGS.search(line):
            return StartupFailure(
                "usage",
                m["msg"][:200],
                f"the program rejected its command line ({m['msg'][:200]}): correct the flags",
            )
    if (m := _NOT_FOUND.match(last)) and (path := m["py"] or m["tf"]) in argument_paths(argv):
        return StartupFailure(
            "missing-file",
            path,
            f"the file {path!r} named on the program's command line does not exist: put it on a volume the "
            "replicas mount at that path, or correct the argument",
        )
    return None
