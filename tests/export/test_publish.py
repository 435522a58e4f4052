"""Atomic publishing and path safety (TF-free)."""

from __future__ import annotations

import json
import os
import shutil
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


def _stage_savedmodel(pub: Publisher, step: int, payload: str, complete: bool = True) -> Path:
    """An export whose ``savedmodel/`` has TF Serving's files (the bytes do not matter to the layout)."""
    with pub.staging(step) as stage:
        (stage / "savedmodel" / "variables").mkdir(parents=True)
        (stage / "savedmodel" / "saved_model.pb").write_text(f"pb {payload}")
        (stage / "savedmodel" / "variables" / "variables.index").write_text(f"index {payload}")
        (stage / MANIFEST).write_text(json.dumps({"complete": complete}))
        return pub.commit(stage, step)


def _tree(top: Path) -> dict[str, str]:
    """Every file under ``top`` by relative path, read through the directory itself; fails on any symlink."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            assert not (Path(dirpath) / name).is_symlink(), f"{Path(dirpath) / name} is a symlink"
        for name in filenames:
            out[(Path(dirpath) / name).relative_to(top).as_posix()] = (Path(dirpath) / name).read_text()
    return out


def test_serving_versions_are_real_directories_of_complete_exports_only(tmp_path):
    """TF Serving's base path ``exports/serving``: ``<version>/saved_model.pb`` + ``variables/`` as real
    files (hard links of the export's), readable through the directory alone, as a ``subPath`` mount or a
    copier that skips links sees it; an export whose required format failed gets no version."""
    with Publisher(tmp_path) as pub:
        _stage_savedmodel(pub, 10, "a")
        _stage_savedmodel(pub, 20, "b")
        _stage_savedmodel(pub, 30, "c", complete=False)
    serving = tmp_path / "exports" / "serving"
    assert sorted(p.name for p in serving.iterdir()) == ["10", "20"]
    assert _tree(serving / "20") == {"saved_model.pb": "pb b", "variables/variables.index": "index b"}
    copy = tmp_path / "copy"
    shutil.copytree(serving, copy, symlinks=True)  # a link would stay a (now dangling) link
    assert _tree(copy) == {
        "10/saved_model.pb": "pb a",
        "10/variables/variables.index": "index a",
        "20/saved_model.pb": "pb b",
        "20/variables/variables.index": "index b",
    }
    pb = serving / "20" / "saved_model.pb"
    assert pb.stat().st_ino == (tmp_path / "exports" / "20" / "savedmodel" / "saved_model.pb").stat().st_ino


def test_serving_follows_reexports_and_replaces_links_of_the_older_layout(tmp_path):
    with Publisher(tmp_path) as pub:
        _stage_savedmodel(pub, 5, "old")
        _stage_savedmodel(pub, 6, "six")
    serving = tmp_path / "exports" / "serving"
    shutil.rmtree(serving / "6")
    os.symlink("../6/savedmodel", serving / "6")  # what an older exporter left
    with Publisher(tmp_path) as pub:
        _stage_savedmodel(pub, 5, "new")
    assert _tree(serving) == {
        "5/saved_model.pb": "pb new",
        "5/variables/variables.index": "index new",
        "6/saved_model.pb": "pb six",
        "6/variables/variables.index": "index six",
    }
    with Publisher(tmp_path) as pub:  # re-exported, now incomplete: no longer served
        _stage_savedmodel(pub, 6, "six again", complete=False)
    assert sorted(p.name for p in serving.iterdir()) == ["5"]
    assert not [p for p in serving.iterdir() if p.name.startswith(".")]


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


def test_kserve_layout_holds_one_version_per_runtime_as_real_files_published_with_the_export(tmp_path):
    from tfps_trainer.export.publish import lay_out_for_kserve
    from tfps_wire import serving_layout

    with Publisher(tmp_path) as pub, pub.staging(7) as stage:
        (stage / "savedmodel" / "variables").mkdir(parents=True)
        (stage / "savedmodel" / "saved_model.pb").write_bytes(b"graph")
        (stage / "savedmodel" / "variables" / "variables.index").write_bytes(b"index")
        (stage / "model.onnx").write_bytes(b"onnx")
        (stage / MANIFEST).write_text("{}")
        assert lay_out_for_kserve(stage, 7) == ["tensorflow", "onnx"]
        final = pub.commit(stage, 7)
    tf_base = Path(serving_layout.base_path(str(final), "tensorflow"))
    assert [p.name for p in tf_base.iterdir()] == ["7"]  # a model base path of exactly this version
    assert (tf_base / "7" / "saved_model.pb").read_bytes() == b"graph"
    assert (tf_base / "7" / "variables" / "variables.index").read_bytes() == b"index"
    repo = Path(serving_layout.base_path(str(final), "onnx"))
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")) == [
        "model",
        "model/7",
        "model/7/model.onnx",
        "model/config.pbtxt",
    ]
    assert (repo / "model" / "7" / "model.onnx").read_bytes() == b"onnx"
    assert 'platform: "onnxruntime_onnx"' in (repo / "model" / "config.pbtxt").read_text()
    assert not [p for p in final.rglob("*") if p.is_symlink()]
    # hard links: the layout costs no second copy on a volume that has them
    assert (tf_base / "7" / "saved_model.pb").stat().st_ino == (final / "savedmodel" / "saved_model.pb").stat().st_ino


def test_kserve_layout_of_an_export_without_those_formats_is_empty(tmp_path):
    from tfps_trainer.export.publish import lay_out_for_kserve

    with Publisher(tmp_path) as pub, pub.staging(3) as stage:
        (stage / "model.tflite").write_bytes(b"x")
        assert lay_out_for_kserve(stage, 3) == []
        assert not (stage / "kserve").exists()
