"""What a task asks of the hardware, normalised for the optimizer.

The task spec (pydantic, shared.task.spec) is what a user wrote; a `ResourceRequest` is what the
optimizer needs from it: plain, hashable, every alternative spelled out. `any_of`, `ordered` and
accelerator alternatives (`{A100: 8, H100: 8}`, a list) each become one request per alternative.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    instance_type: str | None = None
    use_spot: bool = False
    max_hourly_cost: float | None = None  # per node, against the spot price when use_spot


@dataclass(frozen=True, slots=True)
class ResourceChoice:
    """All alternatives for one task: `ordered` keeps the user's order, otherwise the optimizer picks."""

    requests: tuple[ResourceRequest, ...]
    ordered: bool = False
