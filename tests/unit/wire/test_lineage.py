"""The lineage handed to the exporter and written into the manifest (tfps_wire.lineage): the spec's hash,
the image digest, the code's digest as a ConfigMap volume lays the files out."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tfps_wire.job_settings import SettingsError
from tfps_wire.lineage import (
    LINEAGE_ENV,
    MAX_SPEC_BYTES,
    ImageRef,
    Lineage,
    TrainingOutcome,
    code_digest,
    image_digest,
    manifest_section,
    of_spec,
    spec_sha256,
)

HEX = "ab" * 32
SPEC = {"training": {"steps": 100, "batchSize": 32}, "model": {"module": "m", "args": {"ü": 1}}}


def test_the_spec_hash_is_of_its_canonical_json_whatever_the_key_order():
    reordered = {"model": {"args": {"ü": 1}, "module": "m"}, "training": {"batchSize": 32, "steps": 100}}
    assert spec_sha256(SPEC) == spec_sha256(reordered)
    canonical = '{"model":{"args":{"ü":1},"module":"m"},"training":{"batchSize":32,"steps":100}}'
    assert spec_sha256(SPEC) == hashlib.sha256(canonical.encode()).hexdigest()
    assert spec_sha256({**SPEC, "training": {"steps": 101, "batchSize": 32}}) != spec_sha256(SPEC)


def test_the_manifest_section_holds_the_spec_that_hashes_to_its_hash_and_round_trips_the_env():
    image = ImageRef(image="reg/tfps:1", image_id=f"reg/tfps@sha256:{HEX}", pod="j-chief-0")
    training = TrainingOutcome(step=100, target_steps=100, final_checkpoint="checkpoints/ckpt-100", loss=0.5)
    sent = of_spec(SPEC, "operator", image=image, training=training, code_source="j-code")
    got = Lineage.from_env({LINEAGE_ENV: sent.to_env()})
    assert got == sent
    section = manifest_section(got, {"sha256": HEX, "files": 2, "bytes": 10})
    assert spec_sha256(section["spec"]["value"]) == section["spec"]["sha256"]
    assert section["image"] == {
        "image": "reg/tfps:1",
        "imageId": f"reg/tfps@sha256:{HEX}",
        "pod": "j-chief-0",
        "digest": f"sha256:{HEX}",
    }
    assert section["code"] == {"configMap": "j-code", "sha256": HEX, "files": 2, "bytes": 10}
    assert section["training"]["finalCheckpoint"] == "checkpoints/ckpt-100" and section["producer"] == "operator"
    assert json.loads(json.dumps(section)) == section


def test_a_spec_too_large_for_the_environment_travels_as_its_hash():
    big = {"model": {"args": {"blob": "x" * MAX_SPEC_BYTES}}}
    lineage = of_spec(big, "operator")
    assert lineage.spec is None and lineage.spec_sha256 == spec_sha256(big)
    assert "over 32768" in (lineage.spec_omitted or "")
    assert len(lineage.to_env()) < 1024
    section = manifest_section(lineage, None)
    assert section["spec"] == {"sha256": spec_sha256(big), "omitted": lineage.spec_omitted}
    assert section["image"] is None and section["code"] is None


def test_without_lineage_the_section_says_nothing_is_known():
    assert manifest_section(None, None) == {
        "producer": None,
        "spec": None,
        "image": None,
        "code": None,
        "training": None,
    }


@pytest.mark.parametrize(
    "image_id, digest",
    [
        (f"docker.io/library/tfps@sha256:{HEX}", f"sha256:{HEX}"),
        (f"sha256:{HEX}", f"sha256:{HEX}"),
        (f"docker-pullable://tfps@sha256:{HEX}", f"sha256:{HEX}"),
        ("", None),
        ("tfps:latest", None),
        ("sha256:abc", None),
    ],
)
def test_the_digest_is_read_from_the_image_id(image_id, digest):
    assert image_digest(image_id) == digest


def test_a_bad_lineage_names_the_field():
    with pytest.raises(SettingsError, match=r"TFPS_LINEAGE\.specSha256"):
        Lineage.from_env({LINEAGE_ENV: json.dumps({"producer": "operator", "specSha256": "nothex"})})
    with pytest.raises(SettingsError, match="TFPS_LINEAGE is not valid JSON"):
        Lineage.from_env({LINEAGE_ENV: "{"})
    assert Lineage.from_env({}) is None
    # a field a newer operator adds is ignored by an older exporter
    newer = Lineage.from_env({LINEAGE_ENV: json.dumps({"producer": "tfps run", "specSha256": HEX, "later": 1})})
    assert newer is not None and newer.producer == "tfps run"


def _files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_code_digest_of_a_configmap_volume_is_that_of_its_files(tmp_path):
    files = {"train.py": "print(1)\n", "pkg/model.py": "X = 2\n"}
    plain = tmp_path / "plain"
    _files(plain, files)
    (plain / "pkg" / "__pycache__").mkdir()
    (plain / "pkg" / "__pycache__" / "model.cpython-312.pyc").write_bytes(b"\0")
    # kubelet's atomic writer: the keys in a timestamped directory, ..data -> it, each top entry -> ..data/...
    mount = tmp_path / "mount"
    stamp = mount / "..2026_01_01_00_00_00.123456789"
    _files(stamp, files)
    os.symlink(stamp.name, mount / "..data")
    os.symlink("..data/train.py", mount / "train.py")
    os.symlink("..data/pkg", mount / "pkg")
    got = code_digest(mount)
    assert got == code_digest(plain)
    listing = "".join(f"{hashlib.sha256(files[rel].encode()).hexdigest()}  {rel}\n" for rel in sorted(files))
    assert got == {"sha256": hashlib.sha256(listing.encode()).hexdigest(), "files": 2, "bytes": 15}
    (stamp / "pkg" / "model.py").write_text("X = 3\n")
    assert code_digest(mount)["sha256"] != got["sha256"]
