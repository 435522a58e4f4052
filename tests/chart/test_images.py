"""The two Dockerfiles install what the tests run: same constraints, the right extras, the same
pinned versions as the test environment, non-root users, and entrypoints that exist.

Docker is not available here, so the images are not built; these checks read the Dockerfiles,
the Makefile and pyproject.toml, and resolve the dependency closure from the installed metadata.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_DOCKERFILE = ROOT / "operator" / "Dockerfile"
TRAINER_DOCKERFILE = ROOT / "trainer_image" / "Dockerfile"
DIST = "tfps-operator"


@dataclass(frozen=True)
class PipInstall:
    constraints: tuple[str, ...]
    target: str
    extras: frozenset[str]
    editable: bool


def _logical_lines(text: str) -> list[str]:
    """Dockerfile/Makefile lines with backslash continuations joined and comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def _pip_installs_of_project(text: str) -> list[PipInstall]:
    """Every `pip install` that installs this project ('.' or '.[extras]') in the text."""
    found = []
    for line in _logical_lines(text):
        for cmd in re.split(r"&&|;", line):
            words = shlex.split(cmd.replace("$(BIN)/", ""))
            if "pip" not in [Path(w).name for w in words[:3]] or "install" not in words:
                continue
            args = words[words.index("install") + 1 :]
            constraints, targets, editable = [], [], False
            i = 0
            while i < len(args):
                a = args[i]
                if a in ("-c", "--constraint"):
                    constraints.append(args[i + 1])
                    i += 2
                    continue
                if a in ("-e", "--editable"):
                    editable = True
                elif not a.startswith("-"):
                    targets.append(a)
                i += 1
            for t in targets:
                m = re.fullmatch(r"\.(?:\[([\w,-]*)\])?", t)
                if m:
                    extras = frozenset(e for e in (m.group(1) or "").split(",") if e)
                    found.append(PipInstall(tuple(constraints), t, extras, editable))
    return found


def _one_install(path: Path) -> PipInstall:
    installs = _pip_installs_of_project(path.read_text())
    assert len(installs) == 1, (
        f"{path.relative_to(ROOT)}: expected exactly one `pip install` of the project, found {installs}"
    )
    return installs[0]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version
    return pins


def _closure(extras: frozenset[str]) -> dict[str, str]:
    """name -> installed version of every distribution `pip install .[extras]` pulls in, resolved
    from the metadata of the test environment (which `make venv` installed with constraints.txt).
    Skips the test in an environment without those extras (the unit tier runs without the trainer's)."""
    seen: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(DIST, extras)]
    while todo:
        name, want = todo.pop()
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            pytest.skip(f"{name} is not installed here: the closure of {DIST}{sorted(extras)} needs it")
        key = canonicalize_name(dist.metadata["Name"])
        seen[key] = dist.version
        for spec in dist.requires or []:
            req = Requirement(spec)
            envs = [{"extra": e} for e in want] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            dep = canonicalize_name(req.name)
            if dep not in seen:
                todo.append((dep, frozenset(req.extras)))
    return seen


def test_makefile_install_is_the_reference():
    installs = _pip_installs_of_project((ROOT / "Makefile").read_text())
    assert len(installs) == 1
    assert installs[0].constraints == ("constraints.txt",)
    assert installs[0].extras == {"trainer", "dev"}


@pytest.mark.parametrize(
    ("dockerfile", "extras"),
    [(OPERATOR_DOCKERFILE, frozenset()), (TRAINER_DOCKERFILE, frozenset({"trainer"}))],
    ids=["operator", "trainer"],
)
def test_dockerfile_installs_like_the_tests(dockerfile: Path, extras: frozenset[str]):
    """Same constraints file as `make venv`, the expected extras (a subset of what the tests install),
    a regular (not editable) install."""
    reference = _pip_installs_of_project((ROOT / "Makefile").read_text())[0]
    image = _one_install(dockerfile)
    assert image.constraints == reference.constraints
    assert image.extras == extras
    assert image.extras <= reference.extras
    assert set(image.extras) <= set(_pyproject()["project"]["optional-dependencies"])
    assert not image.editable


@pytest.mark.parametrize("extras", [frozenset(), frozenset({"trainer"})], ids=["operator", "trainer"])
def test_image_dependencies_are_pinned_to_the_tested_versions(extras: frozenset[str]):
    """Every distribution an image installs is pinned in constraints.txt at the version the tests
    run with, so the images get exactly the tested versions."""
    pins = _constraints()
    closure = _closure(extras)
    closure.pop(canonicalize_name(DIST))
    unpinned = sorted(n for n in closure if n not in pins)
    assert not unpinned, f"not pinned in constraints.txt (the image would float): {unpinned}"
    drift = {n: (v, pins[n]) for n, v in closure.items() if pins[n] != v}
    assert not drift, f"installed version != constraints.txt pin: {drift}"


def test_operator_image_has_no_tensorflow():
    closure = _closure(frozenset())
    heavy = {"tensorflow", "keras", "tf-keras", "onnxruntime", "tf2onnx", "ai-edge-litert"} & set(closure)
    assert not heavy, f"the operator image would install {sorted(heavy)}"
    assert "tensorflow" in _closure(frozenset({"trainer"}))


def _instructions(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in _logical_lines(path.read_text()):
        if line.strip():
            op, _, rest = line.strip().partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("dockerfile", [OPERATOR_DOCKERFILE, TRAINER_DOCKERFILE], ids=["operator", "trainer"])
def test_dockerfile_hardening(dockerfile: Path):
    ins = _instructions(dockerfile)
    args = dict(rest.split("=", 1) for op, rest in ins if op == "ARG" and "=" in rest)
    base = args["PYTHON_IMAGE"]
    # A pinned Python minor matching requires-python, a pinned Debian release, never :latest.
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?", base), base
    assert _pyproject()["project"]["requires-python"] == ">=3.11"
    froms = [rest for op, rest in ins if op == "FROM"]
    assert froms and all(f.split()[0] == "${PYTHON_IMAGE}" for f in froms), froms
    # The final stage runs as a numeric non-root user (so runAsNonRoot can verify it): for the
    # operator the one the chart's podSecurityContext names, for the trainer the one the operator
    # puts in trainer pods.
    users = [rest for op, rest in ins if op == "USER"]
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    if dockerfile == OPERATOR_DOCKERFILE:
        chart_values = yaml.safe_load((ROOT / "charts" / "tfps-operator" / "values.yaml").read_text())
        assert chart_values["podSecurityContext"]["runAsUser"] == int(uid)
    else:
        from tfps_operator.settings import BuildConfig

        assert BuildConfig().run_as_user == int(uid)
    # Read-only root friendly: no bytecode writes, HOME on the writable /tmp volume.
    env = " ".join(rest for op, rest in ins if op == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "HOME=/tmp" in env


@pytest.mark.parametrize("dockerfile", [OPERATOR_DOCKERFILE, TRAINER_DOCKERFILE], ids=["operator", "trainer"])
def test_build_context_has_what_the_dockerfile_copies(dockerfile: Path):
    """Every COPY source exists and is let through by .dockerignore; pyproject's readme is copied
    (setuptools needs it to build)."""
    allowed = {
        line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    }
    copied = set()
    for op, rest in _instructions(dockerfile):
        if op == "COPY" and not rest.startswith("--from"):
            *sources, _dest = rest.split()
            for s in sources:
                s = s.rstrip("/")
                assert (ROOT / s).exists(), f"{dockerfile.relative_to(ROOT)} copies missing {s}"
                assert s in allowed, f".dockerignore excludes {s}, which {dockerfile.relative_to(ROOT)} copies"
                copied.add(s)
    pyproject = _pyproject()
    roots = pyproject["tool"]["setuptools"]["packages"]["find"]["where"]
    assert {"pyproject.toml", "constraints.txt", pyproject["project"]["readme"], *roots} <= copied


def test_operator_entrypoint_is_the_operator_command():
    ins = _instructions(OPERATOR_DOCKERFILE)
    import json

    entrypoint = json.loads([r for op, r in ins if op == "ENTRYPOINT"][-1])
    cmd = json.loads([r for op, r in ins if op == "CMD"][-1])
    assert entrypoint == ["tfps"]
    assert "tfps" in _pyproject()["project"]["scripts"]
    from tfps_operator.tools.cli import _parser

    assert _parser().parse_args(cmd).command == "operator"


def test_trainer_entrypoint_module_exists():
    ins = _instructions(TRAINER_DOCKERFILE)
    import json

    entrypoint = json.loads([r for op, r in ins if op == "ENTRYPOINT"][-1])
    assert entrypoint[:2] == ["python", "-m"]
    assert importlib.util.find_spec(entrypoint[2] + ".__main__") is not None, f"{entrypoint[2]} has no __main__"


_IMPORT_GUARD = r"""
import importlib, importlib.abc, importlib.metadata as md, json, pkgutil, sys
allowed = set(json.loads(sys.argv[1]))
owners = md.packages_distributions()

class Guard(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        dists = {d.lower().replace("_", "-") for d in owners.get(top, [])}
        if dists and not dists & allowed:
            raise ImportError(f"{name} (from {sorted(dists)}) is not installed in this image")
        return None

sys.meta_path.insert(0, Guard())
import tfps_operator
for mod in pkgutil.walk_packages(tfps_operator.__path__, "tfps_operator."):
    if not mod.name.startswith(sys.argv[2]) and not mod.name.endswith("__main__"):
        importlib.import_module(mod.name)
import tfps_wire.job_settings, tfps_wire.export_result
print("imported", len([m for m in sys.modules if m.startswith("tfps_operator")]))
"""


def test_operator_code_imports_only_what_the_operator_image_installs():
    """Every tfps_operator module the operator process can load (all but the local runner, which
    is `tfps run` and needs the trainer extra) imports with only the base closure available."""
    import json
    import subprocess
    import sys

    allowed = set(_closure(frozenset())) | {canonicalize_name(DIST)}
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_GUARD, json.dumps(sorted(allowed)), "tfps_operator.tools.local"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) > 20
