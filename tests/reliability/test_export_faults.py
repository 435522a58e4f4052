"""Storage faults given to the real exporter (``python -m tfps_trainer.export``): a checkpoint with a
truncated data file or a garbage index, and a job volume that is full or read-only. Each fails with
a named reason, publishes nothing, leaves no staging directory and keeps the earlier export intact.
(NaN weights, symlinks and escaping paths are covered by tests/export/test_export_tf.py.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from .mounts import fill, remount, tmpfs

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]

EXPORT_TESTS = Path(__file__).resolve().parents[1] / "export"
sys.path.insert(0, str(EXPORT_TESTS))
_spec = importlib.util.spec_from_file_location("export_test_helpers", EXPORT_TESTS / "conftest.py")
helpers = sys.modules["export_test_helpers"] = importlib.util.module_from_spec(_spec)  # run_export, settings, snapshot
_spec.loader.exec_module(helpers)  # type: ignore[union-attr]

LINEAR = "tfps_trainer.examples.linear"
ARGS = {"hidden": 16}
FORMATS = ("savedmodel", "onnx")


@pytest.fixture(scope="module")
def earlier(tmp_path_factory) -> Path:
    """A job root with exports/10 published and a newer checkpoint ckpt-20."""
    from checkpoints import train_and_checkpoint

    root = tmp_path_factory.mktemp("exp") / "job"
    train_and_checkpoint(root, LINEAR, ARGS, steps=10)
    first = helpers.run_export(helpers.settings(root, LINEAR, ARGS, formats=FORMATS, verify_samples=16))
    assert first.rc == 0, first.stderr[-3000:]
    assert train_and_checkpoint(root, LINEAR, ARGS, steps=10) == 20
    return root


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    return dst


def _assert_nothing_published(root: Path, before: dict) -> None:
    assert helpers.snapshot(root / "exports") == before, "a failed export changed exports/"
    assert not [p.name for p in (root / "exports").iterdir() if p.name.startswith(".tmp-")], "staging left behind"
    assert os.readlink(root / "exports" / "latest") == "10" and not (root / "exports" / "20").exists()
    assert (root / "exports" / "10" / "manifest.json").is_file()


@pytest.mark.parametrize("damage", ["truncated-data", "garbage-index"])
def test_damaged_checkpoint_is_refused_as_corrupt(earlier: Path, tmp_path: Path, damage: str) -> None:
    root = _copy(earlier, tmp_path / "job")
    before = helpers.snapshot(root / "exports")
    if damage == "truncated-data":
        data = next((root / "checkpoints").glob("ckpt-20.data-*"))
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 3])
    else:
        (root / "checkpoints" / "ckpt-20.index").write_bytes(os.urandom(512))
    run = helpers.run_export(helpers.settings(root, LINEAR, ARGS, formats=FORMATS, verify_samples=16), "--step", "20")
    assert run.rc == 5 and not run.result.ok and run.result.reason == "CheckpointCorrupt", (
        run.result,
        run.stderr[-2000:],
    )
    assert "ckpt-20" in run.result.message
    _assert_nothing_published(root, before)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_volume_fault_during_export_publishes_nothing(earlier: Path, tmp_path: Path, fault: str) -> None:
    with tmpfs(tmp_path / "job", "16m") as root:
        _copy(earlier, root)
        before = helpers.snapshot(root / "exports")
        if fault == "full":
            fill(root)
        else:
            remount(root, "ro")
        run = helpers.run_export(helpers.settings(root, LINEAR, ARGS, formats=FORMATS, verify_samples=16))
        if fault == "full":
            (root / "filler").unlink()
        else:
            remount(root, "rw")
        assert run.rc != 0 and not run.result.ok, run.stdout[-2000:]
        os_reason = "No space left on device" if fault == "full" else "Read-only file system"
        assert run.result.reason in ("PublishFailed", "ConversionFailed"), run.result
        _assert_nothing_published(root, before)
        print(f"{fault}: {run.result.reason}: {run.result.message}")
        assert os_reason in run.result.message, f"the message does not name {os_reason!r}: {run.result.message}"
