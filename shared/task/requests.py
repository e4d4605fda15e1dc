"""What a task asks of the hardware, normalised for the optimizer.

The task spec (pydantic, shared.task.spec) is what a user wrote; a `ResourceRequest` is what the
optimizer needs from it: plain, hashable, every alternative spelled out. `any_of`, `ordered` and
accelerator alternatives (`{A100: 8, H100: 8}`, a list) each become one request per alternative.
The optimizer then sizes each request per cloud the way SkyPilot does (shared.optimizer.host_defaults): the
fields below `host_families` are filled in there, never from the task file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.catalog.accelerators import canonical_name
from shared.task.values import parse_cpus, parse_memory


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    cloud: str | None = None  # lower-case cloud name, from `cloud` or `infra`
    region: str | None = None
    zone: str | None = None
    accelerator: str | None = None  # canonical name; None = no accelerator asked for
    accelerator_count: float = 0
    cpus: float | None = None
    cpus_at_least: bool = True  # "4+" -> (4, True); "4" -> (4, False); SkyPilot: plain number is exact
    memory_gib: float | None = None
    memory_at_least: bool = True
    memory_per_vcpu: float | None = None  # `memory: 4x`: at least 4 GiB per vCPU of the machine
    instance_type: str | None = None
    use_spot: bool = False
    max_hourly_cost: float | None = None  # per node, against the spot price when use_spot
    # Set by the per-cloud sizing (shared.optimizer.host_defaults), not by the task file:
    host_families: tuple[str, ...] | None = None  # only machines of these families; None = any
    any_host: bool = False  # a CPU-only request may take a machine that carries accelerators
    # Where the alternative was written (`("resources", "any_of", 1)`), to point errors at a line.
    source: tuple[str | int, ...] = field(default=("resources",), compare=False)


@dataclass(frozen=True, slots=True)
class ResourceChoice:
    """All alternatives for one task: `ordered` keeps the user's order, otherwise the optimizer picks."""

    requests: tuple[ResourceRequest, ...]
    ordered: bool = False


class AlternativeFields(Protocol):
    """One alternative of `resources:` (the model, shared.task.resources, or the stored record,
    shared.task.stored): what a request is made of."""

    @property
    def cpus(self) -> Any: ...
    @property
    def memory(self) -> Any: ...
    @property
    def instance_type(self) -> str | None: ...
    @property
    def use_spot(self) -> bool | None: ...
    @property
    def max_hourly_cost(self) -> Any: ...

    def location(self) -> tuple[str | None, str | None, str | None]: ...
    def accelerator_alternatives(self) -> list[tuple[str, float]]: ...


class TaskResources(Protocol):
    @property
    def any_of(self) -> Any: ...
    @property
    def ordered(self) -> Any: ...
    @property
    def accelerators(self) -> Any: ...

    def sourced_alternatives(self) -> Sequence[tuple[tuple[str | int, ...], AlternativeFields]]: ...


def choice_of(resources: TaskResources) -> ResourceChoice:
    """One `ResourceRequest` per alternative (any_of/ordered, times accelerator alternatives).
    `ordered:` is ordered, and so is a list under `accelerators`; a mapping is an unordered set."""
    requests: list[ResourceRequest] = []
    for source, fields in resources.sourced_alternatives():
        for request in requests_for(fields, source):
            if request not in requests:
                requests.append(request)
    ordered = resources.ordered is not None or (
        resources.any_of is None and isinstance(resources.accelerators, list)
    )
    return ResourceChoice(tuple(requests), ordered=ordered)


def requests_for(fields: AlternativeFields, source: tuple[str | int, ...]) -> list[ResourceRequest]:
    cloud, region, zone = fields.location()
    cpus, cpus_at_least = parse_cpus(fields.cpus)
    amount, memory_at_least, relative = parse_memory(fields.memory)
    memory_gib, memory_per_vcpu = (None, amount) if relative else (amount, None)
    accelerators: list[tuple[str | None, float]] = [*fields.accelerator_alternatives()] or [(None, 0.0)]
    return [
        ResourceRequest(
            cloud=cloud,
            region=region,
            zone=zone,
            accelerator=canonical_name(name) if name is not None else None,
            accelerator_count=count,
            cpus=cpus,
            cpus_at_least=cpus_at_least,
            memory_gib=memory_gib,
            memory_at_least=memory_at_least,
            memory_per_vcpu=memory_per_vcpu,
            instance_type=fields.instance_type,
            use_spot=bool(fields.use_spot),
            max_hourly_cost=_as_float(fields.max_hourly_cost),
            source=source,
        )
        for name, count in accelerators
    ]


def _as_float(value: float | None) -> float | None:
    """An int too large for a float is, for any price, infinite."""
    try:
        return None if value is None else float(value)
    except OverflowError:
        return float("inf")
