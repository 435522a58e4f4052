"""Atomic publishing and path safety (TF-free)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfps_trainer.export.publish import MANIFEST, Publisher
from tfps_wire.export_manifest import build
from tfps_wire.export_result import ExportError
from tfps_wire.safepaths import check_relative, inside


def _stage(pub: Publisher, step: int, payload: str = "model") -> Path:
    with pub.staging(step) as stage:
        (stage / "model.bin").write_text(payload)
        (stage / MANIFEST).write_text("{}")
        return pub.commit(stage, step)


def test_commit_renames_staging_and_points_latest_at_highest_step(tmp_path):
    with Publisher(tmp_path) as pub:
        _stage(pub, 10)
        _stage(pub, 30)
        _stage(pub, 20)  # an older checkpoint exported later does not move latest back
    exports = tmp_path / "exports"
    assert sorted(p.name for p in exports.iterdir() if not p.name.startswith(".")) == [
        "10",
        "20",
        "30",
        "LATEST",
        "latest",
    ]
    assert os.readlink(exports / "latest") == "30"
    assert (exports / "LATEST").read_text() == "30\n"
    assert (exports / "latest" / "model.bin").read_text() == "model"


def test_failure_inside_staging_leaves_no_directory_and_earlier_export_intact(tmp_path):
    with Publisher(tmp_path) as pub:
        _stage(pub, 1, "first")
        with pytest.raises(RuntimeError), pub.staging(2) as stage:
            (stage / "model.bin").write_text("half")
            raise RuntimeError("conversion blew up")
    exports = tmp_path / "exports"
    assert sorted(p.name for p in exports.iterdir()) == [".lock", "1", "LATEST", "latest"]
    assert (exports / "latest" / "model.bin").read_text() == "first"


def test_stale_staging_from_a_killed_export_is_removed_on_start(tmp_path):
    exports = tmp_path / "exports"
    (exports / ".tmp-7-deadbeef").mkdir(parents=True)
    (exports / ".tmp-7-deadbeef" / MANIFEST).write_text("{}")  # even a manifest does not make it count
    (exports / "keep-me").mkdir()
    with Publisher(tmp_path) as pub:
        assert pub.stale_removed == [".tmp-7-deadbeef"]
        assert pub.complete_steps() == []
    assert (exports / "keep-me").is_dir()


def test_reexport_of_same_step_replaces_it(tmp_path):
    with Publisher(tmp_path) as pub:
        _stage(pub, 5, "old")
        _stage(pub, 5, "new")
    assert (tmp_path / "exports" / "5" / "model.bin").read_text() == "new"
    assert not [p for p in (tmp_path / "exports").iterdir() if p.name.startswith(".old")]


def test_commit_without_manifest_is_refused(tmp_path):
    with Publisher(tmp_path) as pub, pub.staging(3) as stage:
        (stage / "model.bin").write_text("x")
        with pytest.raises(ExportError, match="no manifest.json") as err:
            pub.commit(stage, 3)
    assert err.value.reason == "PublishFailed"
    assert not (tmp_path / "exports" / "3").exists()


def test_symlink_inside_staged_export_is_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s")
    with Publisher(tmp_path / "job") as pub, pub.staging(4) as stage:
        (stage / MANIFEST).write_text("{}")
        os.symlink(secret, stage / "model.bin")
        with pytest.raises(ExportError, match="symlink") as err:
            pub.commit(stage, 4)
    assert err.value.reason == "UnsafePath"


def test_exports_directory_that_is_a_symlink_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "job").mkdir()
    os.symlink(elsewhere, tmp_path / "job" / "exports")
    with pytest.raises(ExportError, match="symlink") as err:
        Publisher(tmp_path / "job")
    assert err.value.reason == "UnsafePath"
    assert list(elsewhere.iterdir()) == []


def test_second_exporter_on_the_same_job_is_refused(tmp_path):
    with Publisher(tmp_path), pytest.raises(ExportError, match="another exporter"), Publisher(tmp_path):
        pass


@pytest.mark.parametrize("target", ["../other/checkpoints", "checkpoints/../../x", "/etc/passwd"])
def test_paths_escaping_the_job_root_are_refused(tmp_path, target):
    with pytest.raises(ExportError) as err:
        inside(tmp_path, target, "--checkpoint")
    assert err.value.reason == "UnsafePath" and "--checkpoint" in err.value.message


def test_symlink_below_the_root_is_refused_but_root_behind_a_symlink_is_fine(tmp_path):
    real = tmp_path / "real"
    (real / "checkpoints").mkdir(parents=True)
    os.symlink(real, tmp_path / "mount")
    assert inside(tmp_path / "mount", "checkpoints", "x") == real / "checkpoints"
    assert inside(tmp_path / "mount", str(tmp_path / "mount" / "checkpoints"), "x") == real / "checkpoints"
    os.symlink("/etc", real / "evil")
    with pytest.raises(ExportError, match="symlink"):
        inside(tmp_path / "mount", "evil/passwd", "--checkpoint")


@pytest.mark.parametrize("rel", ["/abs/model.onnx", "../model.onnx", "a/../../b", ""])
def test_manifest_refuses_absolute_or_escaping_paths(rel):
    assert check_relative("savedmodel/variables/x", "ok") == "savedmodel/variables/x"
    with pytest.raises(ExportError):
        build(
            job="j",
            namespace="n",
            model="m",
            checkpoint_step=1,
            checkpoint_path="checkpoints/ckpt-1",
            inputs=[],
            outputs=[],
            artifacts=[{"format": "onnx", "path": rel}],
        )
