"""Pydantic models of the PSTrainingJob custom resource: the one source of truth for its fields.

Field names on the wire are camelCase (``batchSize``); Python attributes are snake_case. The CRD in
``crds/`` is generated from these models (``tfps crd``, see :mod:`.crd`): types, defaults, enums and
ranges come from the fields, descriptions from the docstrings and field descriptions below, and the
cross-field rules from the CEL expressions declared here with :func:`cel`. ``tfps validate``
(:mod:`.validate`) checks the fields with pydantic and evaluates the very same CEL rules client-side,
so the API server and the client apply one set of rules.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, Final, Literal, NotRequired, Required, cast

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, model_validator, with_config
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from tfps_wire.job_settings import (
    DEFAULT_MIN_SHARD_BYTES,
    DEFAULT_PROGRESS_PORT,
    DEFAULT_STEPS_PER_CLOSURE,
    MAX_STEPS_PER_CLOSURE,
    PartitionerKind,
)
from tfps_wire.uri import URI_PATTERN

from . import reserved

GROUP = "tfps.dev"
VERSION = "v1beta1"
"""The version the operator and the tools read and write, and the CRD's storage version."""
DEPRECATED_VERSIONS = ("v1alpha1",)
"""Still served, with the same schema (docs/install.md, "API versions"): the API server converts by
changing ``apiVersion`` alone, and a job written as one reads back unchanged as the other."""
KIND: Final = "PSTrainingJob"
PLURAL = "pstrainingjobs"
SINGULAR = "pstrainingjob"
SHORT_NAMES = ("psjob", "psjobs")
CATEGORIES = ("tfps",)
API_VERSION: Final = "tfps.dev/v1beta1"
"""``GROUP/VERSION``, spelled out so that its type is the literal the model's ``apiVersion`` accepts."""
ApiVersion = Literal["tfps.dev/v1beta1", "tfps.dev/v1alpha1"]
"""Every served version: a job file or object of either parses the same."""

Role = Literal["chief", "ps", "worker", "evaluator", "dispatcher", "dataworker"]
ROLES: tuple[Role, ...] = ("chief", "ps", "worker", "evaluator", "dispatcher", "dataworker")
DATA_SERVICE_ROLES: tuple[Role, ...] = ("dispatcher", "dataworker")
"""The tf.data service (docs/data-service.md): outside the training cluster, each with its own failure rule."""
FIXED_ROLES: tuple[Role, ...] = ("chief", "evaluator", "dispatcher", "dataworker")
"""Roles whose count cannot change once the job has started; worker and ps counts resize a running job."""
MAX_DATA_WORKERS = 100
"""``<job>-dataworker-<index>`` (index < 100) is as long as ``<job>-evaluator-<index>`` (index < 1000)."""


def replica_field(role: Role) -> str:
    """The field of ``spec.replicas`` that holds ``role`` (the role names pods and labels: ``dataworker``)."""
    return "dataWorker" if role == "dataworker" else role


MAX_JOB_NAME = 49
"""``<job>-evaluator-<index>`` (index < 1000) must be a DNS label of at most 63 characters.
Equal to ``manifests.names.MAX_JOB_NAME`` (a test checks it); repeated here because the API package
must not import the builders."""
JOB_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""DNS-1035 label: the job name is also the name of its headless Service."""

QUANTITY_PATTERN = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,3}))?$"
"""Kubernetes resource.Quantity syntax (the API server's documented regex), without negative values,
and with an integer exponent of at most 3 digits: ``resource.ParseQuantity`` refuses ``1e1.5`` although
the documented regex allows it, and exact comparisons (:mod:`.quantity`) need a bounded exponent."""

ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
"""A container environment variable name, as the API server validates it."""

ExportFormat = Literal["savedmodel", "tflite", "onnx", "keras", "weights"]
AccessMode = Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod", "ReadOnlyMany"]
RestartPolicy = Literal["OnFailure", "Never", "ExitCode"]
Strategy = Literal["ParameterServer", "MultiWorkerMirrored"]
STRATEGIES: tuple[Strategy, ...] = ("ParameterServer", "MultiWorkerMirrored")
SuccessPolicy = Literal["ChiefOrWorker0", "AllWorkers"]
OutputKind = Literal["classification", "regression"]


def cel(
    rule: str, message: str, field_path: str | None = None, message_expression: str | None = None
) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry. ``field_path`` (relative, e.g. ``.chief.replicas``)
    is where the API server (and ``tfps validate``) report a violation. ``message_expression`` (CEL,
    evaluated only when the rule fails) builds a more precise message; ``message`` is the fallback
    when it fails."""
    out = {"rule": rule, "message": message}
    if message_expression:
        out["messageExpression"] = message_expression
    if field_path:
        out["fieldPath"] = field_path
    return out


def _rules(*rules: dict[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": list(rules)}


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON form as stored in Kubernetes (camelCase, no unset optional fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


MAX_QUANTITY_LENGTH = 64
"""Longest quantity string: bounds the CEL cost of ``quantity(v)`` for the API server's estimator."""
MAX_RESOURCES = 32
"""Most entries in limits or requests: bounds the CEL cost of the rules that iterate over them."""


def _quantity(value: Any) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and len(value) > MAX_QUANTITY_LENGTH:
        raise PydanticCustomError("quantity", f"must be at most {MAX_QUANTITY_LENGTH} characters")
    if isinstance(value, str) and re.match(QUANTITY_PATTERN, value):
        return value
    raise PydanticCustomError(
        "quantity", "must be a resource quantity: a non-negative integer or a string such as '500m', '1.5' or '4Gi'"
    )


Quantity = Annotated[
    int | str,
    PlainValidator(_quantity),
    # The form the API server accepts for int-or-string (as controller-gen writes resource.Quantity):
    # the anyOf branches carry types only; pattern applies to strings and minimum to integers.
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "minimum": 0,
            "maxLength": MAX_QUANTITY_LENGTH,
            "pattern": QUANTITY_PATTERN,
        }
    ),
]
"""A Kubernetes resource quantity: int or string on the wire (as in a Pod), never a float."""


# Resource names and quantities as the API server's Pod validation judges them
# (k8s.io/kubernetes pkg/apis/core/validation ValidateResourceRequirements), for the rules below;
# ``k`` is a key of limits/requests.
_EXTENDED = "(k.contains('/') && !k.contains('kubernetes.io/'))"
"""An extended resource (``nvidia.com/gpu``): a domain-prefixed name outside ``kubernetes.io/``."""
_NOT_OVERCOMMITTABLE = f"({_EXTENDED} || k.startsWith('hugepages-'))"
"""Requests of these must equal their limits, and a request needs a limit (``IsOvercommitAllowed``)."""
_CONTAINER_RESOURCE = "(k.contains('/') || k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-'))"
"""A name without a domain must be a standard container resource."""


def _q(field: str) -> str:
    """The CEL quantity of ``self.<field>[k]``, an int or a string on the wire. Not
    ``quantity(string(v))``: the API server's cost estimator cannot bound the size of ``string(v)``
    and would refuse the CRD; ``quantity(v)`` of a string is bounded by the schema's maxLength."""
    v = f"self.{field}[k]"
    return f"(type({v}) == int ? quantity('0').add({v}) : quantity({v}))"


_CMP = f"{_q('requests')}.compareTo({_q('limits')})"
"""Request vs limit of resource ``k``: -1, 0 or 1, exactly ("1" == "1000m", "1Gi" == "1024Mi")."""


def _first(field: str, bad: str, text: str) -> str:
    """A messageExpression naming the first resource ``k`` of ``self.<field>`` for which ``bad`` holds."""
    return f"self.{field}.filter(k, {bad}).map(k, {text})[0]"


def _resource_rules() -> list[dict[str, str]]:
    names = "use cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed resource such as nvidia.com/gpu"
    rules = [
        cel(
            f"!has(self.{f}) || self.{f}.all(k, {_CONTAINER_RESOURCE})",
            f"not a container resource name: {names}",
            f".{f}",
            _first(f, f"!{_CONTAINER_RESOURCE}", f"k + ': not a container resource name: {names}'"),
        )
        for f in ("limits", "requests")
    ]
    missing = f"{_NOT_OVERCOMMITTABLE} && !(has(self.limits) && k in self.limits)"
    rules.append(
        cel(
            f"!has(self.requests) || self.requests.all(k, !({missing}))",
            "an extended resource (e.g. nvidia.com/gpu) or hugepages in requests needs a limit: set limits "
            "(requests default to limits)",
            ".limits",
            _first(
                "requests",
                missing,
                "k + ' is requested without a limit: set limits.' + k + "
                "' (requests default to limits; ' + k + ' cannot be overcommitted)'",
            ),
        )
    )
    both = "has(self.requests) && has(self.limits)"
    unequal = f"{_NOT_OVERCOMMITTABLE} && k in self.limits && {_CMP} != 0"
    rules.append(
        cel(
            f"!({both}) || self.requests.all(k, !({unequal}))",
            "requests of an extended resource (e.g. nvidia.com/gpu) or hugepages must equal its limits",
            ".requests",
            _first("requests", unequal, "k + ': the request must equal the limit (' + k + ' cannot be overcommitted)'"),
        )
    )
    above = f"!{_NOT_OVERCOMMITTABLE} && k in self.limits && {_CMP} > 0"
    rules.append(
        cel(
            f"!({both}) || self.requests.all(k, !({above}))",
            "requests must not exceed limits",
            ".requests",
            _first("requests", above, "k + ': the request must not exceed the limit'"),
        )
    )
    hugepages = " || ".join(
        f"(has(self.{f}) && self.{f}.exists(k, k.startsWith('hugepages-')))" for f in ("limits", "requests")
    )
    cpu_or_memory = " || ".join(
        f"(has(self.{f}) && ('cpu' in self.{f} || 'memory' in self.{f}))" for f in ("limits", "requests")
    )
    rules.append(cel(f"!({hugepages}) || {cpu_or_memory}", "hugepages require a cpu or memory limit or request"))
    page = "quantity(k.substring(10))"  # hugepages-<page size>
    indivisible = (
        f"k.startsWith('hugepages-') && !(isQuantity(k.substring(10)) && {page}.isInteger() && {page}.asInteger() > 0"
        f" && {_q('limits')}.isInteger() && {_q('limits')}.asInteger() % {page}.asInteger() == 0)"
    )
    rules.append(
        cel(
            f"!has(self.limits) || self.limits.all(k, !({indivisible}))",
            "hugepages-<size> must be a whole multiple of its page size",
            ".limits",
            _first(
                "limits",
                indivisible,
                "k + ': must be a whole number that is a multiple of the page size (e.g. "
                "hugepages-2Mi: 4Mi), and the name a valid page size'",
            ),
        )
    )
    fractional = f"{_EXTENDED} && !{_q('limits')}.isInteger()"
    rules.append(
        cel(
            f"!has(self.limits) || self.limits.all(k, !({fractional}))",
            "an extended resource (e.g. nvidia.com/gpu) must be a whole number",
            ".limits",
            _first(
                "limits",
                fractional,
                "k + ': an extended resource must be a whole number written as one, "
                "such as 1, 2 or 1k (not 500m, 1.5 or 1000m)'",
            ),
        )
    )
    return rules


class ResourceRequirements(_Model):
    """Compute resources of a container, as in a Pod's ``resources``. Quantities are integers or
    strings: write ``cpu: "0.5"`` or ``cpu: 500m``, not ``cpu: 0.5``.

    The API server refuses the pods of resources that Kubernetes would not admit, so this API refuses
    them too: names must be container resources (cpu, memory, ephemeral-storage, hugepages-<size> or
    domain-prefixed); requests must not exceed limits; an extended resource such as nvidia.com/gpu (and
    hugepages) needs a limit, its request (which defaults to the limit) must equal it, and it is a
    whole number written without a fraction or milli suffix ("1000m" and "1.0" are refused although
    they equal 1); hugepages-<size> limits are whole multiples of the page size, and hugepages need a
    cpu or memory limit or request."""

    model_config = ConfigDict(json_schema_extra=_rules(*_resource_rules()))

    limits: dict[str, Quantity] | None = Field(
        default=None,
        max_length=MAX_RESOURCES,
        description="Maximum resources, e.g. {cpu: '2', memory: 4Gi, nvidia.com/gpu: 1}.",
    )
    requests: dict[str, Quantity] | None = Field(
        default=None,
        max_length=MAX_RESOURCES,
        description="Guaranteed resources, e.g. {cpu: 500m, memory: 1Gi}; default: the limits.",
    )


_SCHEDULING_LABELS = f"['{reserved.POD_GROUP_LABEL}', '{reserved.KUEUE_QUEUE_LABEL}']"


class ObjectMetaOverride(_Model):
    """Labels and annotations added to every pod of a replica type. Keys under ``tfps.dev/`` are the
    operator's (it finds and counts its pods by them); so is the gang scheduler's pod-group label, and
    a pod's own Kueue queue label would have Kueue admit that pod alone (the job is queued whole)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                f"!has(self.labels) || self.labels.all(k, !k.startsWith('{reserved.LABEL_PREFIX}'))",
                f"labels under {reserved.LABEL_PREFIX} are reserved for the operator",
                ".labels",
            ),
            cel(
                f"!has(self.labels) || self.labels.all(k, !(k in {_SCHEDULING_LABELS}))",
                f"{reserved.POD_GROUP_LABEL} is set by the operator (gang scheduling) and {reserved.KUEUE_QUEUE_LABEL} "
                "goes on the job, not its pods (spec.runPolicy.schedulingPolicy.queue)",
                ".labels",
                f"self.labels.exists(k, k == '{reserved.POD_GROUP_LABEL}') ? '{reserved.POD_GROUP_LABEL}: set by "
                "the operator when gang scheduling is on (spec.runPolicy.schedulingPolicy)' : "
                f"'{reserved.KUEUE_QUEUE_LABEL}: queue the job, not its pods (spec.runPolicy.schedulingPolicy.queue "
                "or the label on the PSTrainingJob): on a pod Kueue would admit that pod alone'",
            ),
            cel(
                f"!has(self.annotations) || self.annotations.all(k, !k.startsWith('{reserved.LABEL_PREFIX}'))",
                f"annotations under {reserved.LABEL_PREFIX} are reserved for the operator",
                ".annotations",
            ),
        )
    )

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


@with_config(ConfigDict(extra="forbid"))
class EnvVar(TypedDict, total=False):
    """A container environment variable (core/v1 EnvVar): name and value, or valueFrom."""

    # In Python an EnvVar stays a plain dict with the wire (camelCase) keys, ready to go into a Pod.

    name: Required[
        Annotated[
            str,
            Field(
                min_length=1,
                max_length=256,
                pattern=ENV_NAME_PATTERN,
                description="Variable name; TF_CONFIG, HOME and TFPS_* are set by the operator.",
            ),
        ]
    ]
    value: NotRequired[str]
    valueFrom: NotRequired[Annotated[dict[str, Any], Field(description="core/v1 EnvVarSource.")]]


@with_config(ConfigDict(extra="forbid"))
class VolumeMount(TypedDict, total=False):
    """A container volume mount (core/v1 VolumeMount)."""

    name: Required[Annotated[str, Field(min_length=1, max_length=253, description="Name of a volume of the pod.")]]
    mountPath: Required[
        Annotated[
            str,
            Field(
                min_length=1,
                max_length=1024,
                description=(
                    "Where to mount it: an absolute path without '.', '..' or empty components; not /, /dev, "
                    "and not at or under the job's storage mountPath, /tmp, /tfps-code, /var/run/secrets/tfps/storage "
                    "(the operator's own mounts), /dev/termination-log, /proc or /sys."
                ),
            ),
        ]
    ]
    readOnly: NotRequired[bool]
    recursiveReadOnly: NotRequired[Annotated[str, Field(max_length=32)]]
    mountPropagation: NotRequired[Annotated[str, Field(max_length=32)]]
    subPath: NotRequired[Annotated[str, Field(max_length=1024)]]
    subPathExpr: NotRequired[Annotated[str, Field(max_length=1024)]]


MAX_VOLUME_MOUNTS = 64
MAX_INIT_CONTAINER_PORTS = 64
"""Most ports of an init container: bounds the CEL cost of the host-port rule."""

_NO_HOST_PROCESS = cel(
    "!has(self.windowsOptions) || !has(self.windowsOptions.hostProcess) || !self.windowsOptions.hostProcess",
    "host process containers are refused (Pod Security baseline)",
    ".windowsOptions.hostProcess",
)
_WINDOWS_OPTIONS = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {"hostProcess": {"type": "boolean"}},
}


def _security_context_schema(description: str, *, container: bool) -> dict[str, Any]:
    """A free-form security context (core/v1) with the fields of the rules no namespace relaxes declared,
    so that CEL can read them (see :mod:`.podsecurity`)."""
    props: dict[str, Any] = {"windowsOptions": _WINDOWS_OPTIONS}
    rules = [_NO_HOST_PROCESS]
    if container:
        props["procMount"] = {"type": "string", "maxLength": 32}
        rules.append(
            cel(
                "!has(self.procMount) || self.procMount == 'Default'",
                "only Default is allowed: an unmasked /proc exposes the node's kernel settings (Pod Security baseline)",
                ".procMount",
            )
        )
    return {
        "type": "object",
        "description": description,
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": props,
        **_rules(*rules),
    }


MAX_VOLUMES = 128
"""Most extra volumes of a template: bounds the CEL cost of the volume-name rule."""
_VOLUME_SCHEMA = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {"name": {"type": "string", "maxLength": 253}},
}
_RESERVED_VOLUMES = str(list(reserved.VOLUMES))


def _reserved_env(n: str) -> str:
    """CEL: environment variable name ``n`` is one the operator sets."""
    return f"({n} in {list(reserved.ENV)} || {n}.startsWith('{reserved.ENV_PREFIX}'))"


def _first_of(items: str, field: str, bad: str, text: str) -> str:
    """A messageExpression: ``text`` (CEL, of ``x``) for the first ``field`` of ``items`` for which ``bad``
    (CEL, of ``x``) holds. The fields are mapped out before filtering: the API server's cost estimate
    keeps their maxLength that way, and not through a filter of the objects."""
    return f"{items}.map(i, {field}).filter(x, {bad}).map(x, {text})[0]"


def _cel_map(entries: dict[str, str]) -> str:
    """A CEL map literal of strings (JSON's string syntax is CEL's)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in entries.items()) + "}"


def _clean_path(p: str) -> str:
    """CEL: ``p`` is absolute, without ``.``, ``..`` or empty components (a trailing ``/`` is allowed), so
    comparing it with a path by prefix is exact."""
    return f"({p}.startsWith('/') && !{p}.contains('//') && !{p}.matches('/[.][.]?(/|$)'))"


def _at_or_under(p: str, d: str) -> str:
    """CEL: path ``p`` is ``d`` or inside it (``d`` a CEL string without a trailing ``/``)."""
    return f"({p} == {d} || {p}.startsWith({d} + '/'))"


_TEMPLATE_MOUNT_PATHS = _cel_map(reserved.TEMPLATE_MOUNT_FORBIDDEN)
_OVER_ROOT_OR_DEV = "['/', '/dev', '/dev/']"


def _template_mount_taken(p: str) -> str:
    """CEL: a template's mount at ``p`` is over / or /dev, or at or under a path the operator relies on."""
    return f"({p} in {_OVER_ROOT_OR_DEV} || {_TEMPLATE_MOUNT_PATHS}.exists(d, {_at_or_under(p, 'd')}))"


def _template_mount_why(p: str) -> str:
    """CEL: why a template may not mount at ``p`` (one for which :func:`_template_mount_taken` holds)."""
    return (
        f'{p} in {_OVER_ROOT_OR_DEV} ? {p} + ": must not mount over the container\'s / or /dev" : '
        f"{_TEMPLATE_MOUNT_PATHS}.filter(d, {_at_or_under(p, 'd')}).map(d, {p} + "
        f"': must not be at or under ' + d + ' (' + {_TEMPLATE_MOUNT_PATHS}[d] + ')')[0]"
    )


_TEMPLATE_MOUNT_MESSAGE = (
    "must not mount over /, /dev, or at or under /tmp (the trainer's scratch space and HOME), /tfps-code (the "
    "code mount), /var/run/secrets/tfps/storage (the storage credentials), /dev/termination-log (where the "
    "operator reads each container's verdict), /proc or /sys"
)


_INIT_CONTAINER_SCHEMA = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 63},
        "securityContext": _security_context_schema("core/v1 SecurityContext of the init container.", container=True),
        "ports": {
            "type": "array",
            "maxItems": MAX_INIT_CONTAINER_PORTS,
            "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"hostPort": {"type": "integer"}, "containerPort": {"type": "integer"}},
                **_rules(
                    cel(
                        "!has(self.hostPort) || self.hostPort == 0",
                        "host ports are refused (Pod Security baseline)",
                        ".hostPort",
                    )
                ),
            },
        },
    },
}


class PodSpecOverride(_Model):
    """Pod settings merged into the pods the operator builds. The operator keeps its own hardening
    defaults unless a field here overrides them; it always sets the container's entrypoint (the
    trainer, which runs ``command``/``args`` in script mode), TF_CONFIG, the ports, the labels and the
    job's storage mount itself. Free-form fields (tolerations, affinity, volumes...) are checked by the
    API server (a dry-run of every pod) before any pod of a run is created: a template it finds invalid,
    or that PodSecurity forbids, fails the job as InvalidSpec with the server's message, and nothing is
    created. A create refused for a passing reason (an exceeded quota) does not fail the job: it is
    retried with back-off (condition Created=False, reason CreateFailed). What the operator's pods rely on
    is refused here (:mod:`.reserved`): its environment variables, volume names, container name and
    mount paths."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                f"!has(self.env) || self.env.all(e, !{_reserved_env('e.name')})",
                "TF_CONFIG, HOME and TFPS_* environment variables are set by the operator",
                ".env",
                _first_of(
                    "self.env", "i.name", _reserved_env("x"), 'x + ": set by the operator (TF_CONFIG, HOME and TFPS_*)"'
                ),
            ),
            cel(
                "!has(self.initContainers) || self.initContainers.all(c, has(c.name) && "
                f"c.name != '{reserved.CONTAINER}')",
                f"every init container needs a name other than {reserved.CONTAINER} (the operator's container)",
                ".initContainers",
            ),
            cel(
                f"!has(self.volumes) || self.volumes.all(v, !has(v.name) || !(v.name in {_RESERVED_VOLUMES}))",
                f"the volume names {', '.join(reserved.VOLUMES)} are the operator's",
                ".volumes",
                _first_of(
                    "self.volumes",
                    "has(i.name) ? i.name : ''",
                    f"x in {_RESERVED_VOLUMES}",
                    f'x + ": the operator names its own volumes so ({", ".join(reserved.VOLUMES)}): pick another name"',
                ),
            ),
            cel(
                f"!has(self.volumeMounts) || self.volumeMounts.all(m, {_clean_path('m.mountPath')})",
                "mountPath must be an absolute path without '.', '..' or empty components",
                ".volumeMounts",
                _first_of(
                    "self.volumeMounts",
                    "i.mountPath",
                    f"!{_clean_path('x')}",
                    "x + \": must be an absolute path without '.', '..' or empty components\"",
                ),
            ),
            cel(
                f"!has(self.volumeMounts) || self.volumeMounts.all(m, !{_template_mount_taken('m.mountPath')})",
                _TEMPLATE_MOUNT_MESSAGE,
                ".volumeMounts",
                _first_of("self.volumeMounts", "i.mountPath", _template_mount_taken("x"), _template_mount_why("x")),
            ),
        )
    )

    node_selector: dict[str, str] | None = Field(default=None, description="Pod nodeSelector.")
    tolerations: list[dict[str, Any]] | None = Field(default=None, description="Pod tolerations (core/v1 Toleration).")
    affinity: dict[str, Any] | None = Field(default=None, description="Pod affinity (core/v1 Affinity).")
    priority_class_name: str | None = Field(default=None, max_length=253, description="Pod priorityClassName.")
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        description="Extra container env (core/v1 EnvVar); TF_CONFIG and TFPS_* are reserved.",
    )
    volumes: list[Annotated[dict[str, Any], WithJsonSchema(_VOLUME_SCHEMA)]] | None = Field(
        default=None,
        max_length=MAX_VOLUMES,
        description=(
            "Extra pod volumes (core/v1 Volume); not named storage, tmp, code or storage-credentials (the operator's)."
        ),
    )
    volume_mounts: list[VolumeMount] | None = Field(
        default=None,
        max_length=MAX_VOLUME_MOUNTS,
        description=("Extra trainer container mounts (core/v1 VolumeMount), each naming a volume of the pod."),
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Trainer container resources; wins over the replica type's resources."
    )
    security_context: (
        Annotated[
            dict[str, Any],
            WithJsonSchema(
                _security_context_schema("Trainer container securityContext (core/v1 SecurityContext).", container=True)
            ),
        ]
        | None
    ) = Field(default=None, description="Trainer container securityContext (core/v1 SecurityContext).")
    pod_security_context: (
        Annotated[
            dict[str, Any],
            WithJsonSchema(
                _security_context_schema("Pod securityContext (core/v1 PodSecurityContext).", container=False)
            ),
        ]
        | None
    ) = Field(default=None, description="Pod securityContext (core/v1 PodSecurityContext).")
    image_pull_secrets: list[dict[str, str]] | None = Field(
        default=None, description="Pod imagePullSecrets, e.g. [{name: regcred}]."
    )
    service_account_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description=(
            "Pod serviceAccountName (e.g. for cloud workload identity). Its API token stays unmounted unless "
            "automountServiceAccountToken is true."
        ),
    )
    automount_service_account_token: bool = Field(
        default=False,
        description=(
            "Mount the service account's Kubernetes API token into the pods; off by default (the trainer needs no "
            "API access)."
        ),
    )
    init_containers: (
        list[
            Annotated[
                dict[str, Any],
                WithJsonSchema(_INIT_CONTAINER_SCHEMA),
            ]
        ]
        | None
    ) = Field(
        default=None, max_length=16, description="Pod initContainers (core/v1 Container), run before the trainer."
    )
    topology_spread_constraints: list[dict[str, Any]] | None = Field(
        default=None, max_length=16, description="Pod topologySpreadConstraints (core/v1 TopologySpreadConstraint)."
    )
    command: list[Annotated[str, Field(min_length=1, max_length=PROGRAM_ITEM_MAX)]] | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Script mode: this replica type's program, instead of spec.model.command.",
    )
    args: list[Annotated[str, Field(max_length=PROGRAM_ITEM_MAX)]] | None = Field(
        default=None, max_length=256, description="Script mode: arguments appended to this replica type's program."
    )


class PodTemplateOverride(_Model):
    """Optional per-replica-type overrides of the generated pods."""

    metadata: ObjectMetaOverride | None = Field(default=None, description="Labels and annotations added to the pods.")
    spec: PodSpecOverride | None = Field(default=None, description="Pod and trainer-container settings.")


class ReplicaSpec(_Model):
    """One replica type (chief, ps, worker, evaluator, dispatcher or dataWorker)."""

    replicas: int = Field(
        default=1,
        ge=0,
        le=1000,
        description=(
            "Number of pods of this type. Chief and evaluator counts are immutable once the job has started; "
            "worker and ps counts may change while it runs (a resize: docs/operator.md)."
        ),
    )
    image: str | None = Field(
        default=None, min_length=1, max_length=1024, description="Image of this type's pods; default spec.image."
    )
    resources: ResourceRequirements | None = Field(default=None, description="Trainer container resources.")
    restart_policy: RestartPolicy = Field(
        default="OnFailure",
        description=(
            "What a failed pod of this type does. A permanent exit code (2 bad arguments, 3 invalid model, 4 "
            "numerics; docs/operator.md has the table) fails the job at once under every policy. OnFailure: "
            "other failures are retried: a worker or evaluator is recreated alone, a chief or PS failure restarts "
            "the whole job (counted against runPolicy.backoffLimit unless it was a preemption). Never: any failure "
            "fails the job. ExitCode: only retryable codes (5 lost PS, 6 preempted, 7 infrastructure, signals) are "
            "retried."
        ),
    )
    recreate_limit: int = Field(
        default=10,
        ge=0,
        le=10000,
        description=(
            "Times a failed worker or evaluator pod is recreated alone before the job fails with "
            "RecreateLimitExceeded (counted per replica type in status.replicaStatuses.<type>.recreated). "
            "Ignored for chief and ps, whose failures restart the whole job."
        ),
    )
    template: PodTemplateOverride | None = Field(default=None, description="Optional overrides of this type's pods.")


class WorkerReplicaSpec(ReplicaSpec):
    """The workers: a ReplicaSpec with the elastic range. ``replicas`` is the size the job asks for (what
    ``kubectl scale`` and an autoscaler set); between ``minReplicas`` and it, the job runs with what can be
    scheduled or admitted."""

    min_replicas: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description=(
            "Elastic jobs: the fewest workers the job runs with (default: replicas, not elastic). Gang "
            "scheduling's minMember and Kueue's worker pod set (minCount) count this many workers; a worker "
            "Pending longer than pendingTimeoutSeconds is left out while the job stays at or above it."
        ),
    )
    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="The most workers the job may be scaled to (kubectl scale, an autoscaler); default: no bound.",
    )
    pending_timeout_seconds: int = Field(
        default=300,
        ge=10,
        le=86400,
        description=(
            "Elastic jobs (minReplicas below replicas): a worker not scheduled after this long is left out "
            "(the job restarts without it, from its latest checkpoint, while at least minReplicas remain) and "
            "added back once a pod in its place is running. Reason WorkersPending in kubectl get, an Event and "
            "the metric tfps_job_workers_left_out."
        ),
    )


def _template_program_rule(role: Role) -> dict[str, str]:
    r = f"self.replicas.{replica_field(role)}"
    t = f"{r}.template.spec"
    return cel(
        f"has(self.model.command) || {_unset(role)}!has({r}.template) || !has({t})"
        f" || (!has({t}.command) && !has({t}.args))",
        "command and args are for script mode: set spec.model.command",
        f".replicas.{role}.template.spec.command",
    )


def _data_service_program_rule(role: Role) -> dict[str, str]:
    field = replica_field(role)
    t = f"self.{field}.template.spec"
    return cel(
        f"!has(self.{field}.template) || !has({t}) || (!has({t}.command) && !has({t}.args))",
        "the tf.data service runs the trainer image's own servers: no command or args",
        f".{field}.template.spec.command",
    )


class Replicas(_Model):
    """The replica types of the job. The training cluster is chief + ps + worker (ParameterServer) or
    workers and an optional chief (MultiWorkerMirrored); the evaluator runs beside it, outside the
    training cluster. Once the job has started, worker and ps counts may change (a resize) and chief and
    evaluator counts may not. ``chief`` and ``ps`` left
    out take their strategy's default (ParameterServer: 1 each; MultiWorkerMirrored: none), filled in
    when the job is read. ``dispatcher`` and ``dataWorker`` are the job's tf.data service
    (docs/data-service.md): one dispatcher and its data workers, both or neither."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel("self.worker.replicas >= 1", "must be ≥ 1: a job needs a worker", ".worker.replicas"),
            cel("self.evaluator.replicas <= 1", "must be 0 or 1", ".evaluator.replicas"),
            cel("self.dispatcher.replicas <= 1", "must be 0 or 1", ".dispatcher.replicas"),
            cel(
                f"self.dataWorker.replicas <= {MAX_DATA_WORKERS}",
                f"must be at most {MAX_DATA_WORKERS}: pod names <job>-dataworker-<index> are DNS labels",
                ".dataWorker.replicas",
            ),
            cel(
                "self.dataWorker.replicas == 0 || self.dispatcher.replicas == 1",
                "must be 1: data workers (spec.replicas.dataWorker) need a dispatcher",
                ".dispatcher.replicas",
            ),
            cel(
                "self.dispatcher.replicas == 0 || self.dataWorker.replicas >= 1",
                "must be ≥ 1: a dispatcher (spec.replicas.dispatcher) needs data workers",
                ".dataWorker.replicas",
            ),
            _data_service_program_rule("dispatcher"),
            _data_service_program_rule("dataworker"),
            cel(
                "!has(self.worker.minReplicas) || self.worker.minReplicas <= self.worker.replicas",
                "must not exceed spec.replicas.worker.replicas",
                ".worker.minReplicas",
            ),
            cel(
                "!has(self.worker.maxReplicas) || self.worker.replicas <= self.worker.maxReplicas",
                "must not exceed spec.replicas.worker.maxReplicas",
                ".worker.replicas",
            ),
        )
    )

    chief: ReplicaSpec | None = Field(
        default=None,
        description=(
            "The chief: it runs the training loop of a ParameterServer job (exactly 1, the default); in a "
            "MultiWorkerMirrored job it is optional (0 or 1) and trains beside the workers as their task 0."
        ),
    )
    ps: ReplicaSpec | None = Field(
        default=None,
        description="Parameter servers: at least 1 in a ParameterServer job (default 1); none in MultiWorkerMirrored.",
    )
    worker: WorkerReplicaSpec = Field(
        default_factory=lambda: WorkerReplicaSpec(replicas=1),
        description="Workers (at least 1); minReplicas below replicas makes the job elastic.",
    )
    evaluator: ReplicaSpec = Field(
        default_factory=lambda: ReplicaSpec(replicas=0),
        description="Optional side-car evaluator (0 or 1); it evaluates every new checkpoint.",
    )
    dispatcher: ReplicaSpec = Field(
        default_factory=lambda: ReplicaSpec(replicas=0),
        description=(
            "The tf.data service's dispatcher (0 or 1; with data workers): fault-tolerant, its journal in "
            "<storage>/<namespace>/<job>/data-service; recreated alone when it fails (docs/data-service.md)."
        ),
    )
    data_worker: ReplicaSpec = Field(
        default_factory=lambda: ReplicaSpec(replicas=0),
        description=(
            "The tf.data service's data workers (0 to 100; with a dispatcher): they run the model module's input "
            "pipeline for every training worker; a failed one is recreated alone while training goes on. Pods "
            "<job>-dataworker-<index>, status.replicaStatuses.dataworker."
        ),
    )

    def of(self, role: Role) -> ReplicaSpec:
        """The spec of ``role`` (every role has one once the job is validated: see ``PSTrainingJobSpec``)."""
        spec = getattr(self, "data_worker" if role == "dataworker" else role)
        if spec is None:
            raise ValueError(f"spec.replicas.{replica_field(role)} is not filled in: validate the job first")
        return cast(ReplicaSpec, spec)


_PATH_SEGMENT = r"([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+|\.)"
"""One component of a relative path that is not empty and not ``..`` (a pattern, not CEL: cheap to admit)."""


class CodeItem(_Model):
    """One file of the code: ConfigMap key -> relative path (as in a configMap volume's items)."""

    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    path: str = Field(
        min_length=1,
        max_length=1024,
        pattern=rf"^{_PATH_SEGMENT}(/{_PATH_SEGMENT})*$",
        description="Relative path: no leading '/', no empty or '..' component.",
    )


class CodeSource(_Model):
    """Code shipped without an image build: the files of a ConfigMap (each key a file), mounted
    read-only at ``/tfps-code`` in every replica and in the export Job, which also run from there
    with it first on ``PYTHONPATH``. ``tfps submit --code DIR`` creates it from a directory."""

    config_map: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Name of a ConfigMap in the job's namespace.",
    )
    items: list[CodeItem] | None = Field(
        default=None,
        max_length=4096,
        description=(
            "Where each key goes under /tfps-code (a ConfigMap key cannot hold '/'); every key at its own name "
            "when unset. tfps submit --code fills it in."
        ),
    )


PROGRAM_ITEM_MAX = 4096
"""Longest single argument of a program (bounds the CEL cost of the rules that read them)."""


_CLEAN_ABSOLUTE_PATH = r"^(/([^/.][^/]*|[.][^/.][^/]*|[.][.][^/]+))+$"
"""An absolute path without '.', '..', empty components or a trailing '/'."""


def _program_dir(what: str) -> Any:
    return Field(
        default=None,
        max_length=1024,
        pattern=_CLEAN_ABSOLUTE_PATH,
        description=(
            f"Where the program writes its {what}, as its pods see it: a path at or under a volumeMount of the "
            "lead's template (spec.replicas.chief, else spec.replicas.worker)."
        ),
    )


class ProgramDirectories(_Model):
    """Script mode: the directories a program writes to of its own accord (its flags: ``--checkpoint_dir``,
    ``--saved_model_dir``, ``--log_dir``), on a volume its pods mount. tfps follows the checkpoints there
    (``status.checkpoint``, Stalled), exports the model saved there (the export Job mounts the lead's
    volumes read-only) and shows the TensorBoard logs there (``tfps tensorboard``), instead of its own
    ``$TFPS_*_DIR`` directories, which the program is then told are these (the environment variables)."""

    checkpoints: str | None = _program_dir(
        "checkpoints (tf.train.CheckpointManager's directory, with its 'checkpoint' state file)"
    )
    saved_model: str | None = _program_dir("final model (a SavedModel directory, or one holding model.keras)")
    tensorboard: str | None = _program_dir("TensorBoard event files")


class ModelSpec(_Model):
    """The user's code: a contract module (``module``), or a program of one's own (``command``, script
    mode: every replica runs it, wrapped by the trainer entrypoint, with TF_CONFIG and the documented
    ``TFPS_*_DIR`` environment; see trainer_image/README.md). A script-mode job may also name a
    module, used only to export the final checkpoint; without one the export converts the model the
    program saved to ``$TFPS_MODEL_DIR``."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "has(self.module) || has(self.command)", "set module (a contract module) or command (your own program)"
            ),
            cel(
                "!has(self.keras) || has(self.command)",
                "keras applies to script mode (command): a contract module imports the Keras it uses",
                ".keras",
            ),
            cel(
                "!has(self.directories) || has(self.command)",
                "directories applies to script mode (command): a contract module's trainer writes to the job's volume",
                ".directories",
            ),
        )
    )

    module: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        description="Dotted Python module name, e.g. tfps_trainer.examples.linear.",
    )
    args: dict[str, Any] = Field(
        default_factory=dict, description="Free-form arguments passed to every contract function."
    )
    command: list[Annotated[str, Field(min_length=1, max_length=PROGRAM_ITEM_MAX)]] | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description=(
            "Script mode: the program every replica runs, e.g. [python, train.py, --epochs, '3']. $(VAR) "
            "references to the container's environment (TFPS_CHECKPOINT_DIR, TFPS_MODEL_DIR...) are "
            "expanded as Kubernetes does; a replica's template.spec.command/args override it."
        ),
    )
    source: CodeSource | None = Field(
        default=None, description="Code from a ConfigMap, on PYTHONPATH and the working directory."
    )
    keras: Literal["legacy", "keras3"] | None = Field(
        default=None,
        description=(
            "Script mode: which Keras tf.keras is in the program and the export Job. legacy (the default): Keras 2 "
            "through tf_keras (TF_USE_LEGACY_KERAS=1), as programs written for TensorFlow <= 2.15 expect "
            "(model.fit under ParameterServerStrategy, optimizer.lr, model.save(dir)); keras3: Keras 3."
        ),
    )

    directories: ProgramDirectories | None = Field(
        default=None,
        description=(
            "Script mode: the program's own checkpoint, saved-model and TensorBoard directories on a volume of "
            "the lead's template, followed, exported and shown instead of the job's own."
        ),
    )

    @property
    def script_mode(self) -> bool:
        return self.command is not None


class CheckpointPolicy(_Model):
    """When checkpoints are written (at least one of everySteps, everySeconds) and how many are kept.
    A final checkpoint is always written when training ends."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel("has(self.everySteps) || has(self.everySeconds)", "set at least one of everySteps, everySeconds"),
        )
    )

    every_steps: int | None = Field(default=None, ge=1, description="Write a checkpoint every N global steps.")
    every_seconds: int | None = Field(default=None, ge=1, description="Write a checkpoint every N seconds.")
    keep: int = Field(default=3, ge=1, le=1000, description="Number of most recent checkpoints kept.")


class VariablePartitioner(_Model):
    """How ParameterServerStrategy splits a variable into shards along its first axis (the rows of an
    embedding table), placed on the parameter servers in turn, one of TensorFlow's three partitioners
    (tf.distribute.experimental.partitioners), picked by the field set: fixedShards (FixedShardsPartitioner:
    every variable in that many shards, small ones too), maxShardBytes (MaxSizePartitioner: the fewest
    shards of at most that size, up to maxShards), or minShardBytes and/or maxShards alone (MinSizePartitioner,
    the default: the most shards of at least minShardBytes, up to maxShards). A variable never gets more
    shards than rows, and scalars are never split. More shards than parameter servers is allowed: shards go
    to the parameter servers round robin, so a server holds several (a checkpoint restores into any
    parameter server count and any split)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "!has(self.fixedShards) || (!has(self.minShardBytes) && !has(self.maxShardBytes))",
                "cannot be set with minShardBytes or maxShardBytes: fixedShards picks FixedShardsPartitioner, "
                "minShardBytes MinSizePartitioner, maxShardBytes MaxSizePartitioner; set one of them",
                ".fixedShards",
            ),
            cel(
                "!has(self.minShardBytes) || !has(self.maxShardBytes)",
                "cannot be set with minShardBytes: maxShardBytes picks MaxSizePartitioner, minShardBytes "
                "MinSizePartitioner; set one of them",
                ".maxShardBytes",
            ),
            cel(
                "!has(self.fixedShards) || !has(self.maxShards)",
                "does not apply with fixedShards, which is the shard count itself: maxShards bounds the shards "
                "of minShardBytes or maxShardBytes",
                ".maxShards",
            ),
        )
    )

    fixed_shards: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description=(
            "FixedShardsPartitioner: split every variable of rank 1 or more into this many shards (fewer when it "
            "has fewer rows), large or small. Not with maxShards."
        ),
    )
    min_shard_bytes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "MinSizePartitioner (also picked when only maxShards is set): the most shards, up to maxShards, that "
            f"keep each at least this many bytes; {DEFAULT_MIN_SHARD_BYTES} (256 KiB) when unset."
        ),
    )
    max_shard_bytes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "MaxSizePartitioner: the fewest shards that keep each at most this many bytes; with maxShards "
            "reached, shards grow past it. Without maxShards a small value splits a large table into many shards."
        ),
    )
    max_shards: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description=(
            "Most shards per variable, often the parameter server count. Unset: 1 for the min-size partitioner "
            "(nothing is split), no limit with maxShardBytes. Not with fixedShards."
        ),
    )

    @property
    def kind(self) -> PartitionerKind:
        """The partitioner the fields pick (one at most is set, a CEL rule says)."""
        if self.fixed_shards is not None:
            return "fixed_shards"
        if self.max_shard_bytes is not None:
            return "max_size"
        return "min_size"


ProcessingMode = Literal["Dynamic", "Off"]


class DataServiceSpec(_Model):
    """How a model module's dataset is distributed through the job's tf.data service (docs/data-service.md)."""

    processing_mode: ProcessingMode = Field(
        default="Dynamic",
        description=(
            "Dynamic (the default): the dispatcher hands the dataset out in splits, each element to one data "
            "worker: at most once per epoch through every restart and fault, elements in flight at a fault are "
            "skipped, never repeated (tf.data ShardingPolicy.DYNAMIC). Off: every data worker runs the whole "
            "dataset (ShardingPolicy.OFF): no visitation guarantee; a data worker that restarts begins again."
        ),
    )


class TrainingSpec(_Model):
    """The training loop."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                f"self.port != {DEFAULT_PROGRESS_PORT}",
                f"must differ from {DEFAULT_PROGRESS_PORT}, the progress port of the chief and the evaluator",
                ".port",
            ),
        )
    )

    steps: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Target global step count; required for a model module. In script mode optional: the step the "
            "program trains to, shown as the progress target."
        ),
    )
    batch_size: int = Field(default=32, ge=1, le=1048576, description="Per-worker batch size.")
    steps_per_closure: int = Field(
        default=DEFAULT_STEPS_PER_CLOSURE,
        ge=1,
        le=MAX_STEPS_PER_CLOSURE,
        description=(
            "Training steps a worker runs per closure the chief schedules (one tf.function call); 1 schedules "
            "every step alone. The step count and checkpoints stay exact; after a worker failure the closure "
            "is re-run, so up to this many steps may be applied twice."
        ),
    )
    checkpoint: CheckpointPolicy = Field(
        default_factory=lambda: CheckpointPolicy(every_steps=100),
        description="Checkpoint policy; default every 100 steps, keep 3.",
    )
    check_numerics: bool = Field(
        default=False, description="Stop with a clear reason on NaN/Inf instead of checkpointing garbage."
    )
    variable_partitioner: VariablePartitioner | None = Field(
        default=None,
        description=(
            "Split variables into shards across the PS (a model module's chief; a program of your own builds its "
            "own strategy); nothing is split when unset."
        ),
    )
    port: int = Field(
        default=2222,
        ge=1024,
        le=65535,
        description=(
            f"gRPC port of the TensorFlow servers; not {DEFAULT_PROGRESS_PORT}, the chief's and evaluator's "
            "progress port."
        ),
    )
    seed: int | None = Field(default=None, ge=0, description="Random seed for reproducible runs.")
    data_service: DataServiceSpec | None = Field(
        default=None,
        description=(
            "The tf.data service's settings; with spec.replicas.dispatcher and dataWorker set it defaults to "
            "processingMode Dynamic."
        ),
    )


class VolumeClaimTemplate(_Model):
    """A PVC the operator creates for the job (owned by it, deleted with it)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel("quantity(self.size).isGreaterThan(quantity('0'))", "must be greater than zero", ".size"),
        )
    )

    storage_class_name: str | None = Field(
        default=None, max_length=253, description="StorageClass; the cluster default when unset."
    )
    access_modes: list[AccessMode] = Field(
        default_factory=lambda: list[AccessMode](["ReadWriteMany"]),
        min_length=1,
        max_length=4,
        description=(
            "PVC access modes. Pods of a job may land on several nodes: ReadWriteOnce suits single-node clusters only."
        ),
    )
    size: str = Field(
        default="10Gi",
        pattern=QUANTITY_PATTERN,
        max_length=MAX_QUANTITY_LENGTH,
        description="Requested size, a resource quantity greater than zero.",
    )


_OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""A Kubernetes object name (DNS-1123 subdomain): lower-case letters, digits, '-' and '.'."""

_STORAGE_PATH_TAKEN = _cel_map(reserved.STORAGE_PATH_FORBIDDEN)
"""CEL map: the paths the job's volume must neither cover nor sit in, and what each is."""


def _overlaps(p: str, d: str) -> str:
    """CEL: path ``p`` is ``d``, inside it, or above it (both without a trailing ``/``)."""
    return f"({_at_or_under(p, d)} || {d}.startsWith({p} + '/'))"


class SecretKeyRef(_Model):
    """One key of a Secret in the job's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=_OBJECT_NAME_PATTERN, description="The Secret's name.")
    key: str = Field(
        default="key.json", min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="The key in it."
    )


class StorageSpec(_Model):
    """Where checkpoints, TensorBoard logs and exports live: exactly one of claimName (an existing PVC),
    volumeClaimTemplate (a PVC the operator creates) and uri (object storage, ``gs://bucket/prefix``).
    On a volume, files live under <mountPath>/<namespace>/<job>/{checkpoints,exports,tensorboard}; with a
    uri, under <uri>/<namespace>/<job>/ in the same layout.
    Default: a 10Gi ReadWriteMany claim created from volumeClaimTemplate."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "[has(self.claimName), has(self.volumeClaimTemplate), has(self.uri)].filter(x, x).size() == 1",
                "set exactly one of claimName, volumeClaimTemplate, uri",
            ),
            cel(
                f"!has(self.uri) || self.uri.matches('{URI_PATTERN}')",
                "must be gs://<bucket>[/<prefix>]: a bucket name of 3-222 lower-case letters, digits, '-', '_' "
                "or '.', starting and ending with a letter or digit",
                ".uri",
            ),
            cel(
                "!has(self.credentialsSecret) || has(self.uri)",
                "only with spec.storage.uri (object storage credentials)",
                ".credentialsSecret",
            ),
            cel(
                "self.mountPath != '/'",
                "must not be /: the job's volume would hide the container's whole filesystem",
                ".mountPath",
            ),
            cel(
                f"self.mountPath == '/' || ({_clean_path('self.mountPath')} && !self.mountPath.endsWith('/'))",
                "must be an absolute path without a trailing '/' and without '.', '..' or empty components",
                ".mountPath",
            ),
            cel(
                f"!{_STORAGE_PATH_TAKEN}.exists(d, {_overlaps('self.mountPath', 'd')})",
                "must not be at, under or above a system directory (/bin, /dev, /etc, /lib, /proc, /run, /sbin, "
                "/sys, /usr, /var/run...), /tmp, /tfps-code, /var/run/secrets/tfps/storage or /opt/tfps: the job's "
                "volume would hide what the trainer needs there",
                ".mountPath",
                f"{_STORAGE_PATH_TAKEN}.filter(d, {_overlaps('self.mountPath', 'd')}).map(d, "
                "'must not be at, under or above ' + d + ' (' + "
                f'{_STORAGE_PATH_TAKEN}[d] + "): the job\'s volume would hide it")[0]',
            ),
        )
    )

    claim_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=_OBJECT_NAME_PATTERN,
        description="An existing PersistentVolumeClaim in the job's namespace.",
    )
    volume_claim_template: VolumeClaimTemplate | None = Field(
        default=None, description="A PVC the operator creates for the job."
    )
    uri: str | None = Field(
        default=None,
        max_length=1024,
        description=(
            "Object storage instead of a volume: gs://<bucket>[/<prefix>]. Pods reach it with the credentials of "
            "their service account (workload identity: set serviceAccountName in the replica templates) or with "
            "credentialsSecret. The bucket must exist: the chief checks it before training."
        ),
    )
    credentials_secret: SecretKeyRef | None = Field(
        default=None,
        description=(
            "With uri: a Secret holding a service-account key (JSON), mounted read-only in the trainer and export "
            "pods only, as GOOGLE_APPLICATION_CREDENTIALS. Unset: the pods' own service account (workload "
            "identity)."
        ),
    )
    mount_path: str = Field(
        default="/tfps",
        pattern=r"^/[^:]*$",
        max_length=1024,
        description=(
            "Where the volume is mounted in every pod: an absolute path without a trailing '/' and without '.', "
            "'..' or empty components; not /, and not at, under or above a system directory (/bin, /boot, /dev, "
            "/etc, /lib, /lib32, /lib64, /libx32, /proc, /run, /sbin, /sys, /usr, /var/run), /tmp, /tfps-code, "
            "/var/run/secrets/tfps/storage or /opt/tfps (the trainer's own mounts and Python environment)."
        ),
    )


def _default_storage() -> StorageSpec:
    return StorageSpec(volume_claim_template=VolumeClaimTemplate())


class Tolerance(_Model):
    """Allowed difference between an artifact and the TensorFlow model on the same inputs, per output:
    max|artifact - model| <= maxAbs + maxRel * scale (scale: the output's largest magnitude; for a
    quantized artifact, its range), and for classification outputs the share of inputs whose predicted
    class agrees >= minArgmaxAgreement (quantized artifacts judge classification outputs by that alone).
    An unset field keeps the exporter's default (docs/export.md)."""

    max_abs: float | None = Field(default=None, ge=0, description="Absolute part of the error bound.")
    max_rel: float | None = Field(
        default=None, ge=0, description="Part of the error bound relative to the output's scale."
    )
    min_argmax_agreement: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "For classification outputs: least share of (non-tied) inputs whose predicted class agrees with the "
            "model's."
        ),
    )


class TFLiteExport(_Model):
    """TensorFlow Lite conversion."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "self.quantization != 'int8' || self.calibrationSamples >= 1",
                "must be ≥ 1 when quantization is int8",
                ".calibrationSamples",
            ),
        )
    )

    quantization: Literal["none", "dynamic", "float16", "int8"] = Field(
        default="none",
        description=(
            "Also produce a quantized variant: none, dynamic (range), float16 or int8 (full integer, needs "
            "calibrationSamples)."
        ),
    )
    calibration_samples: int = Field(
        default=0, ge=0, le=100000, description="Samples from the model's dataset used to calibrate int8."
    )
    quantized_tolerance: Tolerance | None = Field(
        default=None,
        description=(
            "Tolerance of the quantized variant (verify.tolerances.tflite is the float model's); defaults: float16 "
            "maxRel 0.01 / minArgmaxAgreement 0.99, dynamic 0.05 / 0.95, int8 0.10 / 0.90."
        ),
    )


class ONNXExport(_Model):
    """ONNX conversion (tf2onnx)."""

    opset: int = Field(default=17, ge=9, le=23, description="ONNX opset version.")


class VerifySpec(_Model):
    """Every artifact is run on real inputs and compared with the TensorFlow model."""

    samples: int = Field(default=64, ge=1, le=100000, description="Real inputs each artifact is checked on.")
    tolerances: dict[ExportFormat, Tolerance] | None = Field(
        default=None,
        description=(
            "Per-format tolerances of the float artifacts; the exporter's defaults when unset (savedmodel, keras, "
            "weights: maxAbs 1e-5, maxRel 1e-5; tflite, onnx: 1e-4, 1e-4)."
        ),
    )
    output_kinds: dict[str, OutputKind] | None = Field(
        default=None,
        description=(
            "How an output (by serving name) is judged: classification or regression. Undeclared outputs are "
            "classification when they are probabilities, or their labels are class ids; else regression."
        ),
    )


class ExportSpec(_Model):
    """Turn the final checkpoint into verified deployable artifacts (run as a Job after training)."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "self.formats.all(f, self.formats.filter(g, g == f).size() == 1)",
                "must not repeat a format",
                ".formats",
            ),
            cel(
                "!has(self.required) || self.required.all(f, f in self.formats)",
                "every required format must be listed in formats",
                ".required",
            ),
        )
    )

    enabled: bool = Field(default=True, description="false: training only, no export.")
    formats: list[ExportFormat] = Field(
        default_factory=lambda: list[ExportFormat](["savedmodel", "tflite", "onnx"]),
        min_length=1,
        max_length=5,
        description=(
            "Artifacts to produce: a subset of savedmodel, tflite, onnx, keras (.keras file), weights (.weights.h5)."
        ),
    )
    required: list[ExportFormat] | None = Field(
        default=None,
        max_length=5,
        description=(
            "Formats whose failure fails the job; every other format that fails is recorded (status.export.failed, "
            "an Event, condition ExportComplete=False) and the job still succeeds. Unset: savedmodel when it is "
            "among formats, else every format. tflite covers its quantized variant too."
        ),
    )
    preflight: bool = Field(
        default=True,
        description=(
            "Before the training pods start, convert and verify the model with fresh weights (a short Job): a "
            "required format that cannot be exported fails the job at once; other failures are a warning."
        ),
    )
    tflite: TFLiteExport = Field(default_factory=TFLiteExport, description="TensorFlow Lite options.")
    onnx: ONNXExport = Field(default_factory=ONNXExport, description="ONNX options.")
    verify: VerifySpec = Field(default_factory=VerifySpec, description="Verification of every artifact.")
    resources: ResourceRequirements | None = Field(default=None, description="Resources of the export Job's container.")
    backoff_limit: int = Field(default=1, ge=0, le=10, description="Retries of the export Job.")

    def required_formats(self) -> list[ExportFormat]:
        """``required``, or its default: savedmodel when requested, else every requested format."""
        if self.required is not None:
            return list(self.required)
        return ["savedmodel"] if "savedmodel" in self.formats else list(self.formats)


class SchedulingPolicy(_Model):
    """How the job's pods are placed as a whole (Kubeflow TFJob's runPolicy.schedulingPolicy).

    Gang scheduling applies when the operator runs with it enabled (chart value
    ``gangScheduling.enabled``): the operator then creates a PodGroup named after the job that the
    gang scheduler reads, and no pod of the job is bound until ``minAvailable`` of them can be bound
    at once. Without it, ``minAvailable`` and ``scheduleTimeoutSeconds`` have no effect."""

    min_available: int | None = Field(
        default=None,
        ge=1,
        le=4000,
        description=(
            "Pods that must be placeable together before any is bound (the PodGroup's minMember). Between "
            "chief + ps (the job cannot run without them) and every pod of the job; default: every pod."
        ),
    )
    queue: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description=(
            "Kueue LocalQueue of the job (the kueue.x-k8s.io/queue-name label says the same; this field "
            "wins). With the operator's Kueue integration on, the job waits Suspended (reason "
            "WaitingForAdmission) until Kueue admits its Workload; without it, ignored."
        ),
    )
    priority_class: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description=(
            "PriorityClass of every pod of the job (a replica template's priorityClassName wins); a gang "
            "scheduler orders pod groups by it."
        ),
    )
    schedule_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description=(
            "How long the gang scheduler tries to place the group before it rejects it and retries "
            "(the PodGroup's scheduleTimeoutSeconds); the scheduler's default when unset."
        ),
    )


class RunPolicy(_Model):
    """How the job as a whole is run (Kubeflow TFJob's runPolicy)."""

    backoff_limit: int = Field(
        default=3, ge=0, le=100, description="Whole-job restarts allowed before Failed/BackoffLimitExceeded."
    )
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Fail the job after this many seconds of running."
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None, ge=0, description="Delete the job this long after it finished."
    )
    clean_pod_policy: Literal["All", "Running", "None"] = Field(
        default="Running",
        description="Which pods to delete when training ends: All, Running (so PS pods never linger) or None.",
    )
    suspend: bool = Field(default=False, description="true deletes the pods and keeps the job; false resumes it.")
    success_policy: SuccessPolicy = Field(
        default="ChiefOrWorker0",
        description=(
            "When training has succeeded: ChiefOrWorker0 (the default, TFJob's): when the job's lead exits 0 (the "
            "chief, or worker 0 of a MultiWorkerMirrored job without one); AllWorkers (MultiWorkerMirrored only): "
            "when every chief and worker pod has exited 0."
        ),
    )
    scheduler_name: str | None = Field(
        default=None,
        max_length=253,
        description=(
            "Pod schedulerName; default: the gang scheduler's name when the operator has gang scheduling "
            "enabled, else the cluster's default scheduler."
        ),
    )
    scheduling_policy: SchedulingPolicy | None = Field(
        default=None,
        description=("Gang scheduling (minAvailable, scheduleTimeoutSeconds), queue and priority of the job."),
    )
    stall_seconds: int | None = Field(
        default=None, ge=1, description="Mark the job Stalled when no new checkpoint appears for this long."
    )
    stall_policy: Literal["None", "Restart", "Fail"] = Field(
        default="None",
        description=(
            "What a Stalled job does: None only reports it; Restart restarts the job from its latest checkpoint "
            "(counted against backoffLimit); Fail fails it (reason Stalled)."
        ),
    )
    termination_grace_period_seconds: int = Field(
        default=120,
        ge=1,
        le=86400,
        description=(
            "terminationGracePeriodSeconds of the trainer pods: on SIGTERM (preemption, drain, suspend, deletion) the "
            "chief finishes its in-flight steps and saves a checkpoint within this time, then exits as preempted."
        ),
    )


def _mount_rule(role: Role) -> dict[str, str]:
    t = f"self.replicas.{replica_field(role)}.template"
    mounts = f"{t}.spec.volumeMounts"
    taken = _at_or_under("m.mountPath", "self.storage.mountPath")
    why = "the job's volume is mounted there (checkpoints, exports, TensorBoard logs)"
    return cel(
        f"{_unset(role)}!has({t}) || !has({t}.spec) || !has({mounts}) || {mounts}.all(m, !{taken})",
        f"must not mount at or under spec.storage.mountPath: {why}",
        f".replicas.{replica_field(role)}.template.spec.volumeMounts",
        _first_of(
            mounts,
            "i.mountPath",
            _at_or_under("x", "self.storage.mountPath"),
            f'x + ": must not be at or under spec.storage.mountPath (" + self.storage.mountPath + "): {why}"',
        ),
    )


def _program_dir_rule(key: str) -> dict[str, str]:
    """CEL: ``spec.model.directories.<key>`` is at or under a volumeMount of the lead's template."""
    d = f"self.model.directories.{key}"

    def under_a_mount_of(role: Role) -> str:
        t = f"self.replicas.{role}.template"
        mounts = f"{t}.spec.volumeMounts"
        return (
            f"({_unset(role).replace(' || ', ' && ').replace('!has', 'has')}has({t}) && has({t}.spec) && "
            f"has({mounts}) && {mounts}.exists(m, {_at_or_under(d, 'm.mountPath')}))"
        )

    return cel(
        f"!has(self.model.directories) || !has({d}) || "
        f"({_count('chief')} > 0 ? {under_a_mount_of('chief')} : {under_a_mount_of('worker')})",
        "must be at or under a volumeMount of the lead's template (spec.replicas.chief, else spec.replicas.worker): "
        "tfps reads it from that volume (the export Job and tfps tensorboard mount it read-only)",
        f".model.directories.{key}",
    )


def _credentials_env_rule(role: Role) -> dict[str, str]:
    t = f"self.replicas.{replica_field(role)}.template"
    env = f"{t}.spec.env"
    return cel(
        f"!has(self.storage.credentialsSecret) || {_unset(role)}!has({t}) || !has({t}.spec) || !has({env})"
        f" || {env}.all(e, e.name != '{reserved.CREDENTIALS_ENV}')",
        f"{reserved.CREDENTIALS_ENV} is set by the operator to the key of spec.storage.credentialsSecret: "
        "leave it out here, or leave out credentialsSecret",
        f".replicas.{replica_field(role)}.template.spec.env",
    )


def _init_ports_rule(role: Role) -> dict[str, str]:
    t = f"self.replicas.{replica_field(role)}.template"
    inits = f"{t}.spec.initContainers"
    ours = f"(p.containerPort == self.training.port || p.containerPort == {DEFAULT_PROGRESS_PORT})"
    return cel(
        f"{_unset(role)}!has({t}) || !has({t}.spec) || !has({inits})"
        f" || {inits}.all(c, !has(c.ports) || c.ports.all(p, !has(p.containerPort) || !{ours}))",
        f"an init container must not take the trainer's ports: spec.training.port (the TensorFlow server) "
        f"or {DEFAULT_PROGRESS_PORT} (the progress and metrics port); the pod's containers share one network",
        f".replicas.{replica_field(role)}.template.spec.initContainers",
    )


def _count(role: Role, spec: str = "self") -> str:
    """CEL: the replica count of ``role`` in the spec at ``spec``, with the strategy's default for a chief or
    ps left out (ParameterServer: 1, MultiWorkerMirrored: 0), as :class:`PSTrainingJobSpec` fills it in."""
    r = f"{spec}.replicas"
    if role in ("chief", "ps"):
        return f"(has({r}.{role}) ? {r}.{role}.replicas : ({_MWMS.replace('self', spec)} ? 0 : 1))"
    return f"{r}.{replica_field(role)}.replicas"


def _unset(role: str) -> str:
    """CEL prefix of a rule about ``role``'s spec that holds when a chief or ps is left out."""
    return f"!has(self.replicas.{role}) || " if role in ("chief", "ps") else ""


_MWMS = "self.strategy == 'MultiWorkerMirrored'"
_PODS = f"({' + '.join(_count(r) for r in ROLES)})"
"""CEL: every pod of the job."""
_MIN_WORKERS = (
    "(has(self.replicas.worker.minReplicas) ? self.replicas.worker.minReplicas : self.replicas.worker.replicas)"
)
_DATA_SERVICE_MINIMUM = f"{_count('dispatcher')} + ({_count('dataworker')} > 0 ? 1 : 0)"
_GANG_MINIMUM = (
    f"({_MWMS} ? {_count('chief')} + {_MIN_WORKERS} : {_count('chief')} + {_count('ps')}) + {_DATA_SERVICE_MINIMUM}"
)
"""CEL: the pods without which the job cannot train (all-reduce needs every worker it runs with; a job with a
tf.data service needs its dispatcher and a data worker)."""


class ScrapePeer(_Model):
    """Who may scrape the trainer's ``GET /metrics`` (the chief's and evaluators' progress port): a peer the
    job's NetworkPolicy admits to that port, by labels."""

    namespace_labels: dict[str, str] | None = Field(
        default=None,
        description="Labels of the scraper's namespace (matchLabels); {} = every namespace; unset = the job's own.",
    )
    pod_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels of the scraper's pods (matchLabels); {} = every pod there."
    )


class MetricsSpec(_Model):
    """Prometheus access to the trainer's metrics."""

    scrape_from: ScrapePeer | None = Field(
        default=None,
        description="Admit this scraper to the progress port (GET /metrics); unset = the operator's default "
        "(chart value metrics.trainer.scraper), which is off unless enabled.",
    )


ServingRuntime = Literal["tensorflow", "onnx"]
SERVING_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""An InferenceService name: a DNS-1035 label (KServe names its predictor's Deployment and Service after it)."""
SERVING_NAME_MAX = 53
"""Longest InferenceService name: its ``-predictor`` Service must stay within a 63-character label."""


class ServingSpec(_Model):
    """Serve the verified export with KServe: once the export is complete and the runtime's format passed
    verification, the operator creates (or rolls forward) an InferenceService in RawDeployment mode whose
    storage URI is that export's version in the layout the runtime reads. The InferenceService is not owned
    by the job (a served model outlives its training job): a later job naming the same InferenceService
    rolls it forward to its own export; delete it yourself when the model is retired."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "!has(self.maxReplicas) || self.maxReplicas >= self.minReplicas",
                "must be at least minReplicas",
                ".maxReplicas",
            ),
        )
    )

    runtime: ServingRuntime = Field(
        default="tensorflow",
        description=(
            "tensorflow: the SavedModel, served by KServe's TensorFlow Serving runtime (savedmodel must be a "
            "required export format); onnx: model.onnx, served by KServe's Triton runtime as model 'model' (onnx "
            "must be a required export format)."
        ),
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=SERVING_NAME_MAX,
        pattern=SERVING_NAME_PATTERN,
        description="The InferenceService's name in the job's namespace; default: the job's name.",
    )
    min_replicas: int = Field(default=1, ge=1, le=1000, description="Fewest predictor pods.")
    max_replicas: int | None = Field(
        default=None, ge=1, le=1000, description="Most predictor pods (KServe's autoscaling); default: minReplicas."
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Resources of the predictor's model server container; default: the runtime's."
    )
    service_account_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=_OBJECT_NAME_PATTERN,
        description=(
            "The predictor pods' ServiceAccount: with spec.storage.uri, one whose credentials (workload identity, "
            "or KServe's storage secret annotations) read the bucket for KServe's storage initializer."
        ),
    )


_REQUIRED = "(has(self.export.required) ? self.export.required : {default})"


def _required_has(fmt: str) -> str:
    """CEL: ``fmt`` is among the export's required formats (``spec.export.required``, else its default: savedmodel
    when it is among formats, else every format; :meth:`ExportSpec.required_formats`)."""
    default = "(self.export.formats.exists(f, f == 'savedmodel') ? ['savedmodel'] : self.export.formats)"
    return f"{_REQUIRED.format(default=default)}.exists(f, f == '{fmt}')"


class PSTrainingJobSpec(_Model):
    """A TensorFlow parameter-server training job."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            *[_template_program_rule(r) for r in ROLES if r not in DATA_SERVICE_ROLES],
            cel(
                "has(self.model.command) || has(self.training.steps)",
                "required for a model module (the step the trainer trains to)",
                ".training.steps",
            ),
            cel(
                "has(self.model.command) || self.replicas.evaluator.replicas == 0"
                " || has(self.training.checkpoint.everySeconds)"
                " || (has(self.training.checkpoint.everySteps) && has(self.training.steps)"
                " && self.training.checkpoint.everySteps < self.training.steps)",
                "an evaluator needs checkpoints during training: set everySteps below training.steps, or everySeconds",
                ".training.checkpoint",
            ),
            *(_mount_rule(role) for role in ROLES),
            *(_program_dir_rule(key) for key in ("checkpoints", "savedModel", "tensorboard")),
            *(_credentials_env_rule(role) for role in ROLES),
            *(_init_ports_rule(role) for role in ROLES),
            cel(
                "!has(self.model.command) || !has(self.storage.uri)",
                "script mode (spec.model.command) needs a volume: its checkpoints are followed on a filesystem; "
                "use claimName or volumeClaimTemplate",
                ".storage.uri",
            ),
            cel(
                f"!has(self.runPolicy.schedulingPolicy) || !has(self.runPolicy.schedulingPolicy.minAvailable)"
                f" || self.runPolicy.schedulingPolicy.minAvailable <= {_PODS}",
                "must not exceed the job's pods (chief + ps + worker + evaluator + dispatcher + dataWorker replicas)",
                ".runPolicy.schedulingPolicy.minAvailable",
            ),
            cel(
                "!has(self.runPolicy.schedulingPolicy) || !has(self.runPolicy.schedulingPolicy.minAvailable)"
                f" || self.runPolicy.schedulingPolicy.minAvailable >= ({_GANG_MINIMUM})",
                "must be at least chief + ps replicas (ParameterServer) or chief + worker replicas (minReplicas "
                "of an elastic job; MultiWorkerMirrored), and the dispatcher and one data worker of a tf.data "
                "service: the job cannot train without them",
                ".runPolicy.schedulingPolicy.minAvailable",
            ),
            cel(
                f"{_MWMS} || !has(self.replicas.chief) || self.replicas.chief.replicas == 1",
                "must be 1: a job has exactly one chief",
                ".replicas.chief.replicas",
            ),
            cel(
                f"{_MWMS} || !has(self.replicas.ps) || self.replicas.ps.replicas >= 1",
                "must be ≥ 1: a job needs a parameter server",
                ".replicas.ps.replicas",
            ),
            cel(
                f"!({_MWMS}) || !has(self.replicas.ps) || self.replicas.ps.replicas == 0",
                "must be 0: MultiWorkerMirrored jobs have no parameter servers (spec.strategy)",
                ".replicas.ps.replicas",
            ),
            cel(
                f"!({_MWMS}) || !has(self.replicas.chief) || self.replicas.chief.replicas <= 1",
                "must be 0 or 1 in a MultiWorkerMirrored job",
                ".replicas.chief.replicas",
            ),
            cel(
                f"!({_MWMS}) || has(self.model.command)",
                "MultiWorkerMirrored runs your own program: set spec.model.command (a contract module trains with "
                "ParameterServer)",
                ".strategy",
            ),
            cel(
                "!has(self.training.dataService) || self.replicas.dispatcher.replicas == 1",
                "a tf.data service needs its servers: set spec.replicas.dispatcher (1) and spec.replicas.dataWorker",
                ".training.dataService",
            ),
            cel(
                f"{_MWMS} || self.runPolicy.successPolicy != 'AllWorkers'",
                "AllWorkers is for MultiWorkerMirrored jobs: a ParameterServer job succeeds with its chief",
                ".runPolicy.successPolicy",
            ),
            cel(
                "!has(self.serving) || self.export.enabled",
                "serving needs spec.export.enabled: only a verified export is served",
                ".serving",
            ),
            cel(
                f"!has(self.serving) || self.serving.runtime != 'tensorflow' || {_required_has('savedmodel')}",
                "runtime tensorflow serves the SavedModel: savedmodel must be among spec.export.required (its "
                "default when savedmodel is among spec.export.formats)",
                ".serving.runtime",
            ),
            cel(
                f"!has(self.serving) || self.serving.runtime != 'onnx' || {_required_has('onnx')}",
                "runtime onnx serves model.onnx: onnx must be among spec.export.required (unset, required is "
                "savedmodel when it is among formats, else every format)",
                ".serving.runtime",
            ),
            cel(
                "!has(self.serving) || !has(self.storage.volumeClaimTemplate)",
                "a served model outlives its training job, and a volumeClaimTemplate's claim is deleted with the "
                "job: serve from spec.storage.claimName (a claim you keep) or spec.storage.uri",
                ".serving",
            ),
        )
    )

    strategy: Strategy = Field(
        default="ParameterServer",
        description=(
            "How the replicas train together. ParameterServer (the default): a chief drives training on workers "
            "with variables on parameter servers (ParameterServerStrategy). MultiWorkerMirrored: workers (and an "
            "optional chief) train in lock step with all-reduce (MultiWorkerMirroredStrategy and other collective "
            "strategies), no parameter servers; any worker failure restarts every worker from the latest "
            "checkpoint; script mode only. Immutable once the job has started."
        ),
    )

    image: str | None = Field(
        default=None, max_length=1024, description="Trainer image; the operator's default when empty."
    )
    model: ModelSpec = Field(description="The model module and its arguments, or your own program.")
    replicas: Replicas = Field(
        default_factory=Replicas,
        description="Replica types: chief, ps, worker, evaluator, and the tf.data service (dispatcher, dataWorker).",
    )
    training: TrainingSpec = Field(
        default_factory=TrainingSpec, description="Steps, batch size, checkpoints, partitioning."
    )
    storage: StorageSpec = Field(default_factory=_default_storage, description="Where checkpoints and exports live.")
    export: ExportSpec = Field(default_factory=ExportSpec, description="Verified export after training.")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Restarts, deadlines, cleanup, suspension.")
    metrics: MetricsSpec | None = Field(default=None, description="Prometheus access to the trainer's metrics.")
    serving: ServingSpec | None = Field(
        default=None,
        description=(
            "Serve the verified export with KServe (an InferenceService in RawDeployment mode, not owned by the "
            "job); unset: not served."
        ),
    )

    @model_validator(mode="after")
    def _strategy_defaults(self) -> PSTrainingJobSpec:
        """Fill in a chief or ps left out with the strategy's default, so every reader sees all four roles."""
        default = 0 if self.strategy == "MultiWorkerMirrored" else 1
        for role in ("chief", "ps"):
            if getattr(self.replicas, role) is None:
                setattr(self.replicas, role, ReplicaSpec(replicas=default))
        return self

    def program(self, role: Role) -> list[str] | None:
        """Script mode: the program of ``role``'s replicas (its template's command, else
        ``model.command``, then its template's args); None for a contract module and for the tf.data
        service, which always runs the trainer's own servers."""
        if self.model.command is None or role in DATA_SERVICE_ROLES:
            return None
        t = self.replicas.of(role).template
        o = t.spec if t and t.spec else None
        base = (o.command if o and o.command else None) or self.model.command
        return [*base, *((o.args if o and o.args else None) or [])]


Phase = Literal["Pending", "Running", "Restarting", "Exporting", "Succeeded", "Failed", "Suspended"]


class Condition(_Model):
    """A condition of the job (metav1.Condition shape)."""

    type: str = Field(description="Condition type, e.g. Running, Succeeded, Failed, Stalled.")
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(default="", description="CamelCase reason, e.g. BackoffLimitExceeded.")
    message: str = Field(default="", description="Human-readable detail.")
    last_transition_time: datetime | None = None
    observed_generation: int | None = None


class ReplicaStatus(_Model):
    """Pod counts of one replica type."""

    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    recreated: int = Field(
        default=0, description="Pods of this type recreated alone after a failure (bounded by recreateLimit)."
    )


class Recreation(_Model):
    """The crash-loop record of one pod recreated alone: kept in the status so the back-off survives an
    operator restart."""

    total: int = Field(default=0, description="Recreations of this pod over the job's life.")
    recent: int = Field(default=0, description="Recreations within the back-off's reset window (10 minutes).")
    last: datetime | None = Field(default=None, description="When it was last recreated.")


class CheckpointStatus(_Model):
    """The latest checkpoint written."""

    step: int | None = Field(
        default=None, description="Global step of the latest checkpoint (the Step printer column)."
    )
    path: str | None = Field(default=None, description="Checkpoint path on the job's storage.")
    time: datetime | None = None


class TrainingProgress(_Model):
    """Live progress reported by the chief."""

    step: int | None = None
    loss: float | None = None
    steps_per_second: float | None = None
    updated: datetime | None = None


class Artifact(_Model):
    """One verified export artifact."""

    format: ExportFormat
    path: str
    bytes: int | None = None
    sha256: str | None = None
    max_error: float | None = Field(
        default=None, description="Largest difference from the TensorFlow model seen during verification."
    )
    quantization: str | None = None


class FailedArtifact(_Model):
    """A requested format (or TFLite variant) that was not published, and why."""

    format: ExportFormat
    quantization: str | None = None
    reason: str
    message: str


class ExportLineage(_Model):
    """What the export is of, fixed when training succeeded (the export Job is built from it; the exporter
    writes it, with the spec, the code and the library versions, into the export's manifest.json)."""

    spec_sha256: str | None = Field(
        default=None, description="SHA-256 of the spec's canonical JSON (sorted keys, no spaces) when training ended."
    )
    image: str | None = Field(default=None, description="The lead's trainer image as its pod status names it.")
    image_id: str | None = Field(
        default=None,
        description="The lead pod's containerStatuses[].imageID (the image's digest the node resolved); unset when "
        "its status had none.",
    )
    pod: str | None = Field(default=None, description="The lead pod whose success ended training.")


class ExportStatus(_Model):
    """The export Job and its artifacts."""

    job_name: str | None = Field(default=None, description="Name of the export batch/v1 Job.")
    step: int | None = Field(default=None, description="Checkpoint step that was exported.")
    path: str | None = None
    artifacts: list[Artifact] = Field(default_factory=list, description="Published artifacts, each verified.")
    failed: list[FailedArtifact] = Field(
        default_factory=list, description="Requested artifacts that failed, with the reason."
    )
    lineage: ExportLineage | None = Field(default=None, description="What produced the exported model.")


class ServingStatus(_Model):
    """The InferenceService this job hands its export to (condition Serving says how that went)."""

    inference_service: str = Field(description="The InferenceService's name (the job's namespace).")
    runtime: ServingRuntime
    storage_uri: str | None = Field(
        default=None, description="The storage URI of this job's export that the InferenceService was set to."
    )
    step: int | None = Field(default=None, description="The exported step it serves.")


class ClusterSize(_Model):
    """Parameter servers and workers of a training cluster (what its TF_CONFIG lists)."""

    ps: int = 0
    worker: int = 0


ResizeMethod = Literal["Live", "Restart"]
ResizeReason = Literal["Scaled", "WorkersPending", "CapacityFreed", "Admitted"]


class ResizeStatus(_Model):
    """The job's latest resize: from what size to what, how, why, and what it cost."""

    from_: ClusterSize = Field(alias="from", description="The size before.")
    to: ClusterSize = Field(description="The size after.")
    method: ResizeMethod = Field(
        description=(
            "Live: the running cluster went on without the removed workers (ParameterServer, workers removed); "
            "Restart: the lead stopped and saved first, then every pod restarted at the new size from that checkpoint."
        )
    )
    reason: ResizeReason = Field(
        description=(
            "Scaled: spec.replicas changed (kubectl scale, an autoscaler, an edit); WorkersPending: workers "
            "not scheduled within pendingTimeoutSeconds were left out; CapacityFreed: left-out workers could be "
            "scheduled again; Admitted: Kueue admitted a different number of workers."
        )
    )
    requested: datetime | None = Field(default=None, description="When the operator began the resize.")
    run: int | None = Field(
        default=None,
        description="status.restarts of the run the resize left at its new size (a Live one: the same run).",
    )
    completed: datetime | None = Field(
        default=None, description="When every pod of the new size was running (unset while in progress)."
    )
    step: int | None = Field(default=None, description="The last step the lead reported before the resize.")
    resumed_from: int | None = Field(
        default=None, description="Restart: the checkpoint step the new size resumed from (the lead's save on stop)."
    )
    steps_lost: int | None = Field(
        default=None,
        description="Restart: steps reported before the resize and not in the checkpoint it resumed from.",
    )


class PSTrainingJobStatus(_Model):
    """Observed state, written by the operator."""

    phase: Phase | None = Field(
        default=None, description="Pending, Running, Restarting, Exporting, Succeeded, Failed or Suspended."
    )
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    replica_statuses: dict[Role, ReplicaStatus] = Field(
        default_factory=dict, description="Pod counts per replica type."
    )
    workers: str | None = Field(
        default=None,
        description="Workers running/in the cluster, e.g. 2/3, and the size asked for when it differs: 2/3 (want 4).",
    )
    data_workers: str | None = Field(
        default=None,
        description=(
            "A job with a tf.data service: data workers running/asked, e.g. 2/2, and 'no dispatcher' while its "
            "dispatcher is not running: 2/2, no dispatcher (the Data printer column, kubectl get -o wide)."
        ),
    )
    cluster_size: ClusterSize | None = Field(
        default=None,
        description=(
            "The parameter servers and workers the current run's TF_CONFIG lists (status.clusterSize.worker is the "
            "scale subresource's replicas); it follows spec.replicas through resizes."
        ),
    )
    worker_selector: str | None = Field(
        default=None, description="Label selector of the job's worker pods (the scale subresource's, for an HPA)."
    )
    workers_left_out: int = Field(
        default=0, description="Workers asked for but left out: Pending too long, or not admitted by Kueue."
    )
    resize: ResizeStatus | None = Field(default=None, description="The latest resize, or the one in progress.")
    resizes: int = Field(
        default=0, description="Of the restarts, those that resized the job (not counted as failures)."
    )
    restarts: int = Field(default=0, description="Whole-job restarts so far.")
    preemptions: int = Field(
        default=0, description="Of the restarts, those caused by a preemption (not counted against backoffLimit)."
    )
    recreations: dict[str, Recreation] = Field(
        default_factory=dict, description="Crash-loop records of pods recreated alone, by pod name."
    )
    reason: str | None = Field(
        default=None, description="Why the job waits or failed, in one word (the Reason printer column)."
    )
    start_time: datetime | None = Field(
        default=None, description="When the job started; from then on chief and evaluator counts are immutable."
    )
    completion_time: datetime | None = None
    checkpoint: CheckpointStatus | None = None
    progress: TrainingProgress | None = None
    export: ExportStatus | None = None
    serving: ServingStatus | None = None


class ObjectMeta(_Model):
    """The object's metadata; in the CRD only the name is constrained."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    name: str = Field(
        min_length=1,
        max_length=MAX_JOB_NAME,
        pattern=JOB_NAME_PATTERN,
        description=(
            f"Job name: a DNS-1035 label of at most {MAX_JOB_NAME} characters, so that pod names "
            "<job>-<role>-<index> fit in 63 characters."
        ),
    )
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PSTrainingJob(_Model):
    """A TensorFlow parameter-server training job: chief, parameter servers, workers and an optional
    evaluator, with checkpoints on shared storage and a verified export when training succeeds."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            cel(
                "!has(oldSelf.status) || !has(oldSelf.status.startTime) || ("
                + " && ".join(f"{_count(r, 'self.spec')} == {_count(r, 'oldSelf.spec')}" for r in FIXED_ROLES)
                + ")",
                "chief, evaluator, dispatcher and dataWorker counts are immutable once the job has started "
                "(status.startTime is set); worker and ps counts may change",
                ".spec.replicas",
            ),
            cel(
                "!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec.strategy == oldSelf.spec.strategy",
                "strategy is immutable once the job has started (status.startTime is set)",
                ".spec.strategy",
            ),
        )
    )

    api_version: ApiVersion = API_VERSION
    kind: Literal["PSTrainingJob"] = KIND
    metadata: ObjectMeta
    spec: PSTrainingJobSpec
    status: PSTrainingJobStatus | None = None


def replica_counts(job: PSTrainingJob) -> dict[Role, int]:
    """How many pods of each role the job has (0 for a role it does not run)."""
    return {role: job.spec.replicas.of(role).replicas for role in ROLES}
