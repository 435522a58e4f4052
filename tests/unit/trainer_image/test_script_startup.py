"""Which program failures every attempt repeats: real Python programs' real output, classified."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfps_trainer.script.startup import argument_paths, at_import, classify, last_traceback


def run(tmp_path: Path, files: dict[str, str], *args: str) -> tuple[list[str], list[str], int]:
    """Write ``files`` into ``tmp_path``, run ``python main.py ARGS`` there; (output lines, argv, exit code)."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    argv = [sys.executable, *args]
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return (p.stdout + p.stderr).splitlines(), argv, p.returncode


def test_a_module_missing_at_import_names_it_and_how_to_provide_it(tmp_path: Path) -> None:
    lines, argv, code = run(tmp_path, {"main.py": "import json\nimport retrying\n"}, "main.py")
    f = classify(lines, argv, code)
    assert code == 1 and f is not None and f.kind == "missing-module" and f.subject == "retrying"
    assert "pip install retrying" in f.hint and "--code" in f.hint and "FROM the trainer image" in f.hint


def test_a_module_missing_in_a_module_the_program_imports_is_at_import_too(tmp_path: Path) -> None:
    files = {"main.py": "import helpers\n", "helpers.py": "from retrying.api import retry\n"}
    lines, argv, code = run(tmp_path, files, "main.py")
    f = classify(lines, argv, code)
    assert f is not None and f.kind == "missing-module" and f.subject == "retrying"
    assert "pip install retrying" in f.hint


def test_a_module_imported_by_runpy_at_import_counts(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "", "pkg/__main__.py": "import not_installed_here\n"}
    (tmp_path / "pkg").mkdir()
    lines, argv, code = run(tmp_path, files, "-m", "pkg")
    f = classify(lines, argv, code)
    assert f is not None and f.kind == "missing-module" and f.subject == "not_installed_here"


def test_an_import_failing_inside_a_function_keeps_the_usual_rules(tmp_path: Path) -> None:
    main = """
    def train():
        import retrying  # a lazy import, while training

    if __name__ == "__main__":
        train()
    """
    lines, argv, code = run(tmp_path, {"main.py": main}, "main.py")
    assert code == 1 and any("No module named 'retrying'" in x for x in lines)
    assert classify(lines, argv, code) is None


def test_a_syntax_error_in_the_program_or_a_module_it_imports(tmp_path: Path) -> None:
    lines, argv, code = run(tmp_path, {"main.py": "x = (1,\n"}, "main.py")
    f = classify(lines, argv, code)
    assert f is not None and f.kind == "syntax" and f.subject.endswith("main.py:1")
    lines, argv, code = run(tmp_path, {"main.py": "import util\n", "util.py": "def f(:\n    pass\n"}, "main.py")
    f = classify(lines, argv, code)
    assert f is not None and f.kind == "syntax" and f.subject.endswith("util.py:1")


def test_argparse_usage_errors_and_absl_flag_errors(tmp_path: Path) -> None:
    main = """
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--log_dir", required=True)
    p.parse_args()
    """
    lines, argv, code = run(tmp_path, {"main.py": main}, "main.py", "--logdir=/train")
    f = classify(lines, argv, code)
    assert code == 2 and f is not None and f.kind == "usage" and "--log_dir" in f.subject
    absl = """
    from absl import app, flags
    flags.DEFINE_integer("steps", None, "steps", required=True)
    app.run(lambda argv: None)
    """
    lines, argv, code = run(tmp_path, {"main.py": absl}, "main.py")
    f = classify(lines, argv, code)
    assert code == 1 and f is not None and f.kind == "usage" and "steps" in f.subject


def test_missing_files_named_on_the_command_line(tmp_path: Path) -> None:
    lines, argv, code = run(tmp_path, {}, "no_such_program.py")
    f = classify(lines, argv, code)
    assert code == 2 and f is not None and f.kind == "missing-file" and f.subject.endswith("no_such_program.py")
    main = """
    import sys
    open(sys.argv[1].split("=", 1)[1]).read()
    """
    lines, argv, code = run(tmp_path, {"main.py": main}, "main.py", "--data=/no/such/train.csv")
    f = classify(lines, argv, code)
    assert f is not None and f.kind == "missing-file" and f.subject == "/no/such/train.csv"


def test_a_missing_file_the_command_line_does_not_name_and_other_errors_are_not_classified(tmp_path: Path) -> None:
    lines, argv, code = run(tmp_path, {"main.py": "open('/no/such/cache.bin')\n"}, "main.py", "--steps=3")
    assert code == 1 and classify(lines, argv, code) is None
    lines, argv, code = run(tmp_path, {"main.py": "raise ValueError('loss is NaN')\n"}, "main.py")
    assert classify(lines, argv, code) is None


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        (
            ['  File "/c/main.py", line 1, in <module>', '  File "<frozen importlib._bootstrap>", line 1, in _load'],
            True,
        ),
        (['  File "/c/main.py", line 9, in <module>', '  File "/c/main.py", line 3, in train'], False),
        ([], True),
    ],
)
def test_at_import_reads_the_frames(frames: list[str], expected: bool) -> None:
    assert at_import(["Traceback (most recent call last):", *frames, "ImportError: x"]) is expected


def test_the_last_traceback_of_a_chain_decides() -> None:
    lines = ["Traceback (most recent call last):", "A", "During handling...", "Traceback (most recent call last):", "B"]
    assert last_traceback(lines) == ["Traceback (most recent call last):", "B"]
    assert argument_paths(["python", "m.py", "--data=/d/x", "-v", "/e"]) == {"m.py", "/d/x", "/e"}
