"""Object-storage URIs (``gs://bucket/prefix``) next to local paths: TF-free, so the operator shares them.

A job's root is either a directory on a volume or a ``gs://`` URI; TensorFlow's filesystem layer
(``tf.io.gfile``, checkpoints, summaries, SavedModel) takes both. Only joining differs: a URI must
keep its ``//`` (``PurePosixPath`` would fold it to ``gs:/``).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

SCHEMES = ("gs",)
"""URI schemes a job's storage may use."""

BUCKET_PATTERN = r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]"
"""A Cloud Storage bucket name: 3-222 characters of lower-case letters, digits, ``-``, ``_`` and ``.``,
starting and ending with a letter or digit."""

URI_PATTERN = rf"^gs://{BUCKET_PATTERN}(/.*)?$"
"""What ``spec.storage.uri`` accepts: ``gs://<bucket>`` with an optional ``/<prefix>``."""

_URI = re.compile(r"^([a-z][a-z0-9+.-]*)://([^/]*)(/.*)?$")


def is_uri(path: str) -> bool:
    """True for ``scheme://...`` (object storage), False for a local path."""
    return _URI.match(path) is not None


def bucket(uri: str) -> str:
    """The bucket of ``gs://bucket/prefix`` ("" for a local path)."""
    m = _URI.match(uri)
    return m.group(2) if m else ""


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for a local path or a URI, without doubled or trailing slashes."""
    m = _URI.match(root)
    if m is None:
        return str(PurePosixPath(root, *parts))
    scheme, host, path = m.group(1), m.group(2), m.group(3) or ""
    rest = str(PurePosixPath("/", path.lstrip("/"), *parts))
    return f"{scheme}://{host}{'' if rest == '/' else rest}"
