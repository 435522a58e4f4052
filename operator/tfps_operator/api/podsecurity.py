"""Which pods a job may ask the operator for: Kubernetes Pod Security Standards *baseline*, plus no root.

The operator creates pods with its own rights, so a job's author who may not create pods must not
obtain through a job a pod the cluster would refuse them (a confused deputy). Every pod template a job
carries (``spec.replicas.<role>.template``; the export and pre-flight Jobs run with the chief's) is
checked here, before any child of the job is created.

Two kinds of rule:

* **Absolute** (:data:`ABSOLUTE`): host-level settings a training job has no use for (a Windows
  HostProcess container, an unmasked ``/proc``, a host port). No namespace relaxes them, so the CRD
  refuses them too (CEL rules in :mod:`.models`), and the operator again for objects that slipped past.
  Host namespaces (``hostNetwork``, ``hostPID``, ``hostIPC``) and ephemeral containers are not fields
  of a template at all: the API server refuses or drops them, and the operator's parser refuses them.
* **Relaxable**: hostPath volumes, privileged containers, privilege escalation, added capabilities
  beyond baseline's list, running as root, SELinux options, seccomp/AppArmor ``Unconfined`` and
  unsafe sysctls. The operator refuses them unless the job's namespace is one the operator's
  settings relax (``TFPS_RELAXED_NAMESPACES``, chart value ``jobPodSecurity.relaxedNamespaces``).
  The CRD cannot know that setting, so the operator enforces these at reconcile time and
  ``tfps validate`` reports them as the default setting would.

Pure: a function of the job's spec (and whether its namespace is relaxed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .models import ROLES, PSTrainingJobSpec

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
"""Capabilities Pod Security baseline lets a container add (the container runtime's default set)."""

SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
"""Sysctls Pod Security baseline allows (its ``latest`` version)."""

SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
"""SELinux types Pod Security baseline allows; it forbids setting the user or role."""

APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"

ABSOLUTE = ("windowsOptions.hostProcess", "procMount", "hostPort")
"""Suffixes of the fields whose rules no namespace relaxes (also CEL rules of the CRD)."""

RELAX_HINT = "allowed only in namespaces the operator relaxes (jobPodSecurity.relaxedNamespaces)"


@dataclass(frozen=True)
class Violation:
    """One refused setting: the wire path of the field and why."""

    path: str
    reason: str
    relaxable: bool = True

    @property
    def detail(self) -> str:
        """The reason, and for a relaxable rule where it is allowed."""
        return f"{self.reason}; {RELAX_HINT}" if self.relaxable else self.reason

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


def refusals(spec: PSTrainingJobSpec, relaxed: bool = False) -> list[Violation]:
    """What the operator refuses in ``spec``'s pod templates: every violation, or in a relaxed
    namespace only the absolute ones."""
    return [v for v in violations(spec) if not (relaxed and v.relaxable)]


def message(found: list[Violation]) -> str:
    """The InvalidSpec message of :func:`refusals`' result."""
    return "pod security (Pod Security baseline, no root; nothing was created): " + "; ".join(map(str, found))


def violations(spec: PSTrainingJobSpec) -> list[Violation]:
    """Every setting of the job's pod templates outside Pod Security baseline plus no root."""
    found: list[Violation] = []
    for role in ROLES:
        template = spec.replicas.of(role).template
        if template is None:
            continue
        where = f"spec.replicas.{role}.template"
        if template.metadata is not None:
            found += _apparmor_annotations(template.metadata.annotations or {}, f"{where}.metadata.annotations")
        o = template.spec
        if o is None:
            continue
        found += _volumes(o.volumes or [], f"{where}.spec.volumes")
        found += _pod_context(o.pod_security_context or {}, f"{where}.spec.podSecurityContext")
        found += _container_context(o.security_context or {}, f"{where}.spec.securityContext")
        for i, init in enumerate(o.init_containers or []):
            found += _init_container(init, f"{where}.spec.initContainers[{i}]")
    return found


def _volumes(volumes: list[dict[str, Any]], where: str) -> Iterator[Violation]:
    for i, vol in enumerate(volumes):
        if isinstance(vol, Mapping) and vol.get("hostPath") is not None:
            yield Violation(f"{where}[{i}].hostPath", "hostPath volumes are refused: they expose the node's files")


def _apparmor_annotations(annotations: Mapping[str, str], where: str) -> Iterator[Violation]:
    for key, value in annotations.items():
        if key.startswith(APPARMOR_ANNOTATION) and value != "runtime/default" and not value.startswith("localhost/"):
            yield Violation(f"{where}[{key}]", f"AppArmor profile {value!r} is refused: use runtime/default")


def _is_root(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


def _common(ctx: Mapping[str, Any], where: str) -> Iterator[Violation]:
    """The rules pod and container security contexts share."""
    if _is_root(ctx.get("runAsUser")):
        yield Violation(f"{where}.runAsUser", "0 runs as root")
    if ctx.get("runAsNonRoot") is False:
        yield Violation(f"{where}.runAsNonRoot", "false would let the image run as root")
    se = ctx.get("seLinuxOptions")
    if isinstance(se, Mapping):
        if se.get("type", "") not in SELINUX_TYPES:
            yield Violation(f"{where}.seLinuxOptions.type", f"{se.get('type')!r} is not a container SELinux type")
        for key in ("user", "role"):
            if se.get(key):
                yield Violation(f"{where}.seLinuxOptions.{key}", "must not be set")
    for key in ("seccompProfile", "appArmorProfile"):
        profile = ctx.get(key)
        if isinstance(profile, Mapping) and profile.get("type") == "Unconfined":
            yield Violation(f"{where}.{key}.type", "Unconfined is refused: use RuntimeDefault or Localhost")
    win = ctx.get("windowsOptions")
    if isinstance(win, Mapping) and win.get("hostProcess") is True:
        yield Violation(f"{where}.windowsOptions.hostProcess", "host process containers are refused", relaxable=False)


def _pod_context(ctx: Mapping[str, Any], where: str) -> Iterator[Violation]:
    yield from _common(ctx, where)
    for i, sysctl in enumerate(ctx.get("sysctls") or []):
        name = sysctl.get("name") if isinstance(sysctl, Mapping) else None
        if name not in SAFE_SYSCTLS:
            yield Violation(f"{where}.sysctls[{i}].name", f"{name!r} is not a safe sysctl")


def _container_context(ctx: Mapping[str, Any], where: str) -> Iterator[Violation]:
    yield from _common(ctx, where)
    if ctx.get("privileged") is True:
        yield Violation(f"{where}.privileged", "privileged containers are refused")
    if ctx.get("allowPrivilegeEscalation") is True:
        yield Violation(f"{where}.allowPrivilegeEscalation", "true is refused (setuid binaries could gain root)")
    caps = ctx.get("capabilities")
    added = caps.get("add") if isinstance(caps, Mapping) else None
    for i, cap in enumerate(added or []):
        if cap not in BASELINE_CAPABILITIES:
            yield Violation(f"{where}.capabilities.add[{i}]", f"{cap!r} is beyond what Pod Security baseline allows")
    if ctx.get("procMount", "Default") != "Default":
        yield Violation(
            f"{where}.procMount",
            "only Default is allowed: an unmasked /proc exposes the node's kernel settings",
            relaxable=False,
        )


def _init_container(init: Mapping[str, Any], where: str) -> Iterator[Violation]:
    ctx = init.get("securityContext")
    yield from _container_context(ctx if isinstance(ctx, Mapping) else {}, f"{where}.securityContext")
    for j, port in enumerate(init.get("ports") or []):
        if isinstance(port, Mapping) and port.get("hostPort"):
            yield Violation(f"{where}.ports[{j}].hostPort", "host ports are refused", relaxable=False)
