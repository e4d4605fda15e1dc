"""What a task asks of the hardware, normalised for the optimizer.

The task spec (pydantic, shared.task.spec) is what a user wrote; a `ResourceRequest` is what the
optimizer needs from it: plain, hashable, every alternative spelled out. `any_of`, `ordered` and
accelerator alternatives (`{A100: 8, H100: 8}`, a list) each become one request per alternative.
The optimizer then sizes each request per cloud the way SkyPilot does (shared.optimizer.host_defaults): the
fields below `host_families` are filled in there, never from the task file.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
