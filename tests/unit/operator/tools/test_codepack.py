"""Packing a code directory into a ConfigMap for spec.model.source: which files, text vs binary, keys
that hold no '/', and the size limit refused before anything is written."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from tfps_operator.tools.codepack import CodePackError, pack


def tree(root: Path, files: dict[str, bytes | str]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def test_text_binary_nested_paths_and_ignored_files(tmp_path: Path) -> None:
    root = tree(
        tmp_path / "code",
        {
            "train.py": "print('hi')\n",
            "pkg/__init__.py": "",
            "pkg/model.py": "X = 1\n",
            "vocab.bin": b"\x00\xff\xfe",
            "pkg/__pycache__/model.cpython-311.pyc": b"\x00",
            ".gitignore": "data/\n*.ckpt\n",
            "data/big.csv": "1,2\n",
            "w.ckpt": "x",
        },
    )
    out = pack(root)
    assert sorted(i["path"] for i in out.items) == [
        ".gitignore",
        "pkg/__init__.py",
        "pkg/model.py",
        "train.py",
        "vocab.bin",
    ]
    by_path = {i["path"]: i["key"] for i in out.items}
    assert all("/" not in k for k in by_path.values()) and len(set(by_path.values())) == len(by_path)
    assert out.data[by_path["pkg/model.py"]] == "X = 1\n"
    assert base64.b64decode(out.binary_data[by_path["vocab.bin"]]) == b"\x00\xff\xfe"
    assert out.binary_files == ["vocab.bin"]
    cm = out.configmap("job-code", "ns", {"kind": "PSTrainingJob", "uid": "u"})
    assert cm["metadata"]["ownerReferences"] == [{"kind": "PSTrainingJob", "uid": "u"}] and "binaryData" in cm


def test_in_a_git_work_tree_gitignore_is_honoured_exactly(tmp_path: Path) -> None:
    root = tree(
        tmp_path / "repo",
        {
            "train.py": "x\n",
            ".gitignore": "/secrets\n!keep.log\n*.log\n",
            "secrets/k": "s",
            "run.log": "l",
            "keep.log": "k",
            "sub/a.py": "a\n",
        },
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    paths = sorted(i["path"] for i in pack(root).items)
    assert paths == [".gitignore", "sub/a.py", "train.py"]


def test_over_the_configmap_limit_is_refused_naming_the_largest_files(tmp_path: Path) -> None:
    root = tree(tmp_path / "code", {"train.py": "x\n", "weights.h5": b"\x01" * 700_000, "data.npz": b"\x02" * 500_000})
    with pytest.raises(
        CodePackError,
        match=r"packs to 1172 KiB, over the ConfigMap limit of 1024 KiB \(largest: "
        r"weights.h5 \(684 KiB\), data.npz \(488 KiB\)",
    ):
        pack(root)


def test_an_empty_or_missing_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CodePackError, match="has no files to ship"):
        pack(tmp_path / "empty")
    with pytest.raises(CodePackError, match="is not a directory"):
        pack(tmp_path / "nope")
