"""The volumes of a job's pods, as ``tfps run`` gives them to its local processes (pure: plans, no I/O).

A pod sees its template's volumes at their mount paths; a local process sees the same paths, bound in its
own mount namespace (:mod:`.mountns`) to directories under the work directory, so that nothing a program
writes lands outside it:

=========================  ===============================================================================
``persistentVolumeClaim``  ``<workdir>/volumes/<claimName>`` (``/<subPath>``), shared by every process that
                           mounts the claim, as the claim is shared by the pods; kept between runs
``emptyDir``               ``<job dir>/local/emptydir/<task>/<volume>``, one per process, empty at each start
                           (a recreated pod gets a new one)
``configMap``, ``secret``  files written from a ConfigMap or Secret document of the job file (``items``
                           and ``optional`` as the kubelet reads them), mounted read-only
=========================  ===============================================================================

Any other kind (``hostPath``, ``nfs``, ``csi``...) is refused, naming the field: it names storage this machine
does not have, or this machine's own paths.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tfps_wire.safepaths import at_or_under

from ...api.models import PSTrainingJob, Role, replica_counts, replica_field
from ..local_layout import LOCAL_DIR, VOLUMES_DIR

SUPPORTED = ("persistentVolumeClaim", "emptyDir", "configMap", "secret")


class VolumeRefusal(ValueError):
    """A volume ``tfps run`` cannot give a process; the message names the field and the reason."""


@dataclass(frozen=True)
class Bind:
    """``source`` (a directory on this machine) at ``target`` (the mount path) in a process's namespace."""

    source: str
    target: str
    read_only: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "readOnly": self.read_only}


@dataclass(frozen=True)
class ProjectedFile:
    """A file of a ConfigMap or Secret volume: its path relative to the volume, its bytes, its mode."""

    path: str
    data: bytes
    mode: int


@dataclass(frozen=True)
class RoleVolumes:
    """One role's mounts. ``binds`` name an emptyDir's source with ``{task}`` for the process's name;
    ``files`` is what to write into each ConfigMap/Secret directory before the first start."""

    binds: tuple[Bind, ...] = ()
    empty_dirs: tuple[str, ...] = ()
    """Sources (with ``{task}``) emptied before each start."""
    files: Mapping[str, tuple[ProjectedFile, ...]] = field(default_factory=dict)
    """ConfigMap/Secret directory -> its files."""
    claims: tuple[str, ...] = ()
    """Claim directories (created, kept)."""

    def read_only(self) -> RoleVolumes:
        """The same volumes, every one mounted read-only (the export's view of the lead's)."""
        binds = tuple(Bind(b.source, b.target, True) for b in self.binds)
        return RoleVolumes(binds, self.empty_dirs, self.files, self.claims)

    def for_task(self, task: str) -> tuple[Bind, ...]:
        return tuple(Bind(b.source.replace("{task}", task), b.target, b.read_only) for b in self.binds)


def host_path(binds: Iterable[Bind], path: str) -> str | None:
    """Where ``path`` (as a process sees it) is on this machine: under the bind whose mount path holds it
    (the deepest), or None when no bind does."""
    found = [b for b in binds if at_or_under(path, b.target)]
    if not found:
        return None
    b = max(found, key=lambda x: len(x.target))
    rest = path[len(b.target) :].lstrip("/")
    return str(Path(b.source) / rest) if rest else b.source


def _docs_by_kind(documents: Iterable[Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    found: dict[tuple[str, str], Mapping[str, Any]] = {}
    for d in documents:
        if isinstance(d, dict) and d.get("kind") in ("ConfigMap", "Secret"):
            name = (d.get("metadata") or {}).get("name")
            if isinstance(name, str):
                found[(d["kind"], name)] = d
    return found


def _content(kind: str, doc: Mapping[str, Any], where: str) -> dict[str, bytes]:
    """A ConfigMap's or Secret's keys and bytes."""
    out: dict[str, bytes] = {}
    plain, encoded = ("data", "binaryData") if kind == "ConfigMap" else ("stringData", "data")
    for key, value in (doc.get(encoded) or {}).items():
        try:
            out[key] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise VolumeRefusal(f"{where}: {kind} key {key!r} in {encoded} is not base64") from None
    for key, value in (doc.get(plain) or {}).items():
        out[key] = str(value).encode()
    return out


def _projected(
    kind: str, vol: Mapping[str, Any], doc: Mapping[str, Any] | None, where: str
) -> tuple[ProjectedFile, ...]:
    if doc is None:
        return ()
    content = _content(kind, doc, where)
    default_mode = int(vol.get("defaultMode", 0o644 if kind == "ConfigMap" else 0o600))
    items = vol.get("items")
    if not items:
        return tuple(ProjectedFile(k, v, default_mode) for k, v in sorted(content.items()))
    files = []
    for i, item in enumerate(items):
        key, path = item.get("key"), item.get("path")
        if key not in content:
            if vol.get("optional"):
                continue
            raise VolumeRefusal(f"{where}.items[{i}].key: {kind} {doc['metadata']['name']!r} has no key {key!r}")
        rel = PurePosixPath(str(path))
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise VolumeRefusal(f"{where}.items[{i}].path: {path!r} must be a relative path without '..'")
        files.append(ProjectedFile(str(rel), content[key], int(item.get("mode", default_mode))))
    return tuple(files)


def plan(
    job: PSTrainingJob, documents: Iterable[Any], workdir: Path, job_dir: Path, source: str
) -> dict[Role, RoleVolumes]:
    """Each role's mounts (roles without volume mounts are left out), or :class:`VolumeRefusal`.

    ``documents``: the job file's other documents (ConfigMaps, Secrets); ``source``: the file's name, for
    the messages."""
    docs = _docs_by_kind(documents)
    out: dict[Role, RoleVolumes] = {}
    for role, count in replica_counts(job).items():
        if count == 0:
            continue
        template = job.spec.replicas.of(role).template
        spec = template.spec if template is not None else None
        mounts = (spec.volume_mounts if spec is not None else None) or []
        if not mounts:
            continue
        base = f"spec.replicas.{replica_field(role)}.template.spec"
        volumes = {v.get("name"): (i, v) for i, v in enumerate((spec.volumes if spec is not None else None) or [])}
        binds: list[Bind] = []
        empties: list[str] = []
        files: dict[str, tuple[ProjectedFile, ...]] = {}
        claims: list[str] = []
        for m_i, mount in enumerate(mounts):
            name = mount["name"]
            if name not in volumes:
                raise VolumeRefusal(f"{base}.volumeMounts[{m_i}].name: no volume {name!r} in {base}.volumes")
            v_i, vol = volumes[name]
            where = f"{base}.volumes[{v_i}]"
            kinds = [k for k in vol if k != "name"]
            kind = kinds[0] if len(kinds) == 1 else None
            read_only = bool(mount.get("readOnly", False))
            sub = mount.get("subPath") or ""
            if sub and (PurePosixPath(sub).is_absolute() or ".." in PurePosixPath(sub).parts):
                raise VolumeRefusal(f"{base}.volumeMounts[{m_i}].subPath: {sub!r} must be relative without '..'")
            if kind == "persistentVolumeClaim":
                claim = (vol[kind] or {}).get("claimName")
                if not isinstance(claim, str) or not claim or "/" in claim or claim in (".", ".."):
                    raise VolumeRefusal(f"{where}.persistentVolumeClaim.claimName: a claim name is required")
                claim_dir = str(workdir / VOLUMES_DIR / claim / sub)  # an empty subPath adds nothing
                claims.append(claim_dir)
                read_only = read_only or bool(vol[kind].get("readOnly", False))
                binds.append(Bind(claim_dir, mount["mountPath"], read_only))
            elif kind == "emptyDir":
                src = str(job_dir / LOCAL_DIR / "emptydir" / "{task}" / name)
                empties.append(src)
                binds.append(Bind(f"{src}/{sub}" if sub else src, mount["mountPath"], read_only))
            elif kind in ("configMap", "secret"):
                doc_kind = "ConfigMap" if kind == "configMap" else "Secret"
                ref = (vol[kind] or {}).get("name" if kind == "configMap" else "secretName")
                doc = docs.get((doc_kind, ref)) if isinstance(ref, str) else None
                if doc is None and not (vol[kind] or {}).get("optional"):
                    raise VolumeRefusal(
                        f"{where}.{kind}: {doc_kind} {ref!r} is not in {source}: add it to the file as another "
                        f"document (kubectl create {doc_kind.lower()} {ref} --from-file=... --dry-run=client -o "
                        "yaml), or mark the volume optional"
                    )
                src = str(job_dir / LOCAL_DIR / kind.lower() / name)
                files[src] = _projected(doc_kind, vol[kind] or {}, doc, where + f".{kind}")
                binds.append(Bind(f"{src}/{sub}" if sub else src, mount["mountPath"], True))
            else:
                what = ", ".join(kinds) or "no source"
                raise VolumeRefusal(
                    f"{where}: tfps run cannot mount a {what} volume (it gives a local process "
                    f"{', '.join(SUPPORTED)} volumes only): use a persistentVolumeClaim, whose files are "
                    f"{workdir / VOLUMES_DIR}/<claimName> on this machine"
                )
        out[role] = RoleVolumes(tuple(binds), tuple(empties), files, tuple(claims))
    return out
