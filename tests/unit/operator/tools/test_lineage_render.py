"""`tfps artifacts NAME` shows what produced the export: from status.export.lineage without a download,
from manifest.json's lineage with --download; `tfps run` tells its exporter the spec and how training ended."""

from __future__ import annotations

from support.operator_helpers import make_job, status
from tfps_operator.api.models import PSTrainingJob
from tfps_operator.tools.client.render import lineage_lines, status_artifacts_table
from tfps_wire.lineage import ImageRef, TrainingOutcome, manifest_section, of_spec

HEX = "e" * 64
IMAGE_ID = f"registry.local/tfps-trainer@sha256:{HEX}"


def _done(export: dict) -> PSTrainingJob:
    return make_job().model_copy(update={"status": status(phase="Succeeded", export=export)})


def test_the_status_table_names_the_spec_hash_and_the_leads_image():
    export = {
        "jobName": "mnist-export",
        "step": 100,
        "path": "exports/100",
        "lineage": {"specSha256": "a" * 64, "image": "tfps-trainer:1", "imageId": IMAGE_ID, "pod": "mnist-chief-0"},
    }
    text = status_artifacts_table(_done(export))
    assert f"spec sha256 {'a' * 64}" in text and f"image {IMAGE_ID} (pod mnist-chief-0)" in text
    unknown = {**export, "lineage": {"specSha256": "a" * 64, "image": "tfps-trainer:1", "pod": "mnist-chief-0"}}
    text = status_artifacts_table(_done(unknown))
    assert "tfps-trainer:1 (digest unknown: no imageID in the pod status)" in text


def test_the_manifest_lineage_is_shown_whole():
    lineage = of_spec(
        {"training": {"steps": 100}},
        "operator",
        image=ImageRef(image="tfps-trainer:1", image_id=IMAGE_ID, pod="mnist-chief-0"),
        training=TrainingOutcome(step=100, target_steps=100, loss=0.125, reported_step=96, steps_per_second=40.0),
        code_source="mnist-code",
    )
    manifest = {
        "checkpoint": {"step": 100, "path": "checkpoints/ckpt-100"},
        "versions": {"tensorflow": "2.21.0", "keras": "3.15.1"},
        "lineage": manifest_section(lineage, {"sha256": "c" * 64, "files": 3, "bytes": 1200}),
    }
    text = "\n".join(lineage_lines(manifest))
    assert "recorded by operator" in text and f"sha256 {lineage.spec_sha256}" in text
    assert f"digest sha256:{HEX} (pod mnist-chief-0)" in text
    assert f"ConfigMap mnist-code: sha256 {'c' * 64} (3 files, 1200 B)" in text
    assert "checkpoint step 100 checkpoints/ckpt-100" in text
    assert "final step 100/100, loss 0.125 at step 96, 40 steps/s" in text
    assert "tensorflow 2.21.0, keras 3.15.1" in text
    bare = "\n".join(lineage_lines({"checkpoint": {"step": 5}}))
    assert "nobody: the exporter was run by hand" in bare and "no pod status named one" in bare


def test_tfps_run_tells_the_exporter_the_spec_and_how_training_ended(tmp_path):
    from tfps_operator.manifests.jobsettings import job_settings
    from tfps_operator.tools.local.export import local_lineage
    from tfps_operator.tools.local.progress_display import Status
    from tfps_operator.tools.local.supervisor import LocalJob, TrainingResult
    from tfps_wire.lineage import spec_sha256

    job = make_job(ps=1, workers=1)
    plan = LocalJob(job=job, settings=job_settings(job, mount_path=str(tmp_path)))
    trained = TrainingResult(
        ok=True,
        message="completed step 100/100; final checkpoint checkpoints/ckpt-100",
        status=Status(step=96, loss=0.125, steps_per_second=40.0, checkpoint_step=80),
    )
    lineage = local_lineage(plan, trained)
    assert lineage.producer == "tfps run" and lineage.image is None
    assert lineage.spec == job.spec.to_wire() and lineage.spec_sha256 == spec_sha256(job.spec.to_wire())
    assert lineage.training is not None
    assert (lineage.training.step, lineage.training.final_checkpoint, lineage.training.target_steps) == (
        100,
        "checkpoints/ckpt-100",
        100,
    )
    assert (lineage.training.loss, lineage.training.reported_step) == (0.125, 96)
