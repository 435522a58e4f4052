"""The export's lineage on the real API server: the export Job carries the image digest read from the lead's
pod status (the kubelet's containerStatuses[].imageID, played by the test as kwok has no kubelet), and the
spec whose hash the job's status records."""

from __future__ import annotations

import pytest
from operator_harness import KWOK_HANDS_OFF, job_body

from tfps_wire.lineage import Lineage, spec_sha256

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

IMAGE_ID = "registry.local/tfps-trainer@sha256:" + "9" * 64


def test_the_export_job_gets_the_chief_pods_image_digest(kube, operator):
    kube.create_job(job_body("j", export=True, chief_template=KWOK_HANDS_OFF))
    kube.wait_until(lambda: "j-chief-0" in kube.trainer_pods("j"), timeout=20, what="chief created")
    summary = "tfps-trainer chief/0: completed step 10/10; final checkpoint checkpoints/ckpt-10"
    kube.finish_pod("j-chief-0", "Succeeded", 0, summary, image_id=IMAGE_ID)
    st = kube.wait_phase("j", "Exporting")
    ej = kube.wait_until(
        lambda: next(iter(kube.d(kube.batch.list_namespaced_job(kube.ns).items)), None),
        timeout=20,
        what="export Job created",
    )
    container = ej["spec"]["template"]["spec"]["containers"][0]
    lineage = Lineage.from_env({e["name"]: e.get("value", "") for e in container["env"]})
    assert lineage is not None and lineage.producer == "operator"
    assert lineage.image is not None
    assert (lineage.image.image_id, lineage.image.digest, lineage.image.pod) == (
        IMAGE_ID,
        "sha256:" + "9" * 64,
        "j-chief-0",
    )
    assert lineage.image.image == container["image"]  # the harness reports the pod's own image
    recorded = st["export"]["lineage"]
    assert (recorded["imageId"], recorded["pod"]) == (IMAGE_ID, "j-chief-0")
    assert recorded["specSha256"] == lineage.spec_sha256 == spec_sha256(lineage.spec or {})
    assert lineage.spec is not None and lineage.spec["training"]["steps"] == 10
    assert lineage.training is not None
    assert (lineage.training.step, lineage.training.final_checkpoint) == (10, "checkpoints/ckpt-10")
