"""Plan one task: every feasible (cloud, region, zone, instance type, market), best first.

Feasibility, per alternative (`ResourceRequest`):
- accelerator name and count must match exactly (SkyPilot's rule: `A100:3` does not fit `A100:4`);
  a request without accelerator or instance type only gets CPU-only offerings;
- `cpus`/`memory` are minimums (`8+`) or exact (`8`), `memory: 4x` is GiB per vCPU of the machine;
  what a task leaves open is sized per cloud as SkyPilot sizes it (shared.optimizer.host_defaults: default
  machine families and `cpus: 8+`, `4x` for CPU-only tasks, GCP's N1 host sizes for attached GPUs),
  and clouds without multi-node clusters are left out for `num_nodes > 1`;
- `cloud`, `region`, `zone`, `instance_type` pins, `enabled_clouds`, and the blocklist;
- `use_spot` needs a spot market; `max_hourly_cost` is compared with the price of the market used.

Order (the failover order; the provisioner walks it):
- cost objective: per-node hourly price, then cloud, region, zone, instance type. The estimated
  cost is `num_nodes * $/h * hours`, so price order is cost order within a task;
- time objective: estimated hours (below), then the cost order;
- `any_of` (and accelerator alternatives): one merged order across alternatives; `ordered`: the
  alternatives in the user's order, each in the objective's order. An offering reachable through
  two alternatives appears once, at its first place.

Estimated hours: `hours` under the cost objective. Under the time objective, `hours` is the run
time on the hardware the first alternative names, scaled by relative throughput:
`hours * speed(first alternative) / speed(candidate)`, where a GPU VM's speed is
`RELATIVE_THROUGHPUT[accelerator] * count` and a CPU VM's is `vcpus * CPU_THROUGHPUT_PER_VCPU`.

The list is capped at `max_candidates` (default 100): enough failover places for any attempt, and a
re-plan after failures (with the blocklist) reaches past the cap. `max_candidates=None` returns all.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Sequence
from itertools import chain

from shared.catalog.offering import Offering
from shared.errors import UserError
from shared.optimizer.host_defaults import in_families, sized_for
from shared.optimizer.index import (
    ANY_HARDWARE,
    Entry,
    HardwareKey,
    HasOfferings,
    OfferingIndex,
    clouds_asked,
    fits,
    hardware_keys,
    index_for,
)
from shared.optimizer.misses import explain_no_offering
from shared.optimizer.plan import Block, Candidate
from shared.task.requests import ResourceChoice, ResourceRequest

DEFAULT_MAX_CANDIDATES = 100
DEFAULT_CPUS = 8.0
OBJECTIVES = ("cost", "time")

# Relative training throughput of one accelerator, V100 = 1.0 (rough public benchmark ratios, mixed
# precision). Only the order matters for planning; an accelerator not listed counts as 1.0.
RELATIVE_THROUGHPUT: dict[str, float] = {
    "B200": 7.0,
    "H200": 4.2,
    "H200-SXM": 4.2,
    "GH200": 4.0,
    "H100-SXM": 3.6,
    "H100-MEGA": 3.6,
    "H100": 3.5,
    "H100-NVLINK": 3.5,
    "MI300X": 3.5,
    "H100-NVL": 3.0,
    "A100-80GB-SXM": 2.3,
    "A100-80GB": 2.2,
    "A100": 2.0,
    "A800": 2.0,
    "L40S": 1.8,
    "RTX5090": 1.8,
    "L40": 1.5,
    "RTX4090": 1.4,
    "RTXPRO6000S": 1.8,
    "RTXPRO6000WS": 1.8,
    "RTX6000-Ada": 1.5,
    "A6000": 1.3,
    "RTXA6000": 1.3,
    "A40": 1.2,
    "V100-32GB": 1.05,
    "V100": 1.0,
    "A30": 1.0,
    "RTX3090": 0.9,
    "A10": 0.8,
    "A10G": 0.7,
    "L4": 0.6,
    "P100": 0.6,
    "T4": 0.3,
    "P4": 0.2,
    "K80": 0.2,
}
CPU_THROUGHPUT_PER_VCPU = 0.02  # a 50-vCPU VM ≈ one V100: only matters when alternatives mix CPU and GPU


def hardware_speed(accelerator: str | None, accelerator_count: float, vcpus: float) -> float:
    """Relative throughput of one VM (see RELATIVE_THROUGHPUT)."""
    if accelerator is None:
        return max(vcpus, 1.0) * CPU_THROUGHPUT_PER_VCPU
    return RELATIVE_THROUGHPUT.get(accelerator, 1.0) * max(accelerator_count, 1e-3)


def requests_of(choice: ResourceChoice) -> list[ResourceRequest]:
    """The alternatives of a choice; no alternative at all means SkyPilot's default machine."""
    return list(choice.requests) or [ResourceRequest()]


def sized_requests(
    request: ResourceRequest, index: OfferingIndex, enabled_clouds: Collection[str] | None, num_nodes: int
) -> list[ResourceRequest]:
    """One request per cloud that may run it, sized the way SkyPilot sizes it there (host_defaults)."""
    clouds = [request.cloud] if request.cloud is not None else sorted(index.clouds)
    sized = []
    for cloud in clouds:
        if enabled_clouds is not None and cloud not in enabled_clouds:
            continue
        one = sized_for(request, cloud, num_nodes)
        if one is not None:
            sized.append(one)
    return sized


def check_objective(minimize: str, hours: float = 1.0) -> None:
    if minimize not in OBJECTIVES:
        raise UserError(f"unknown objective {minimize!r}", field="minimize", hint="use cost or time")
    if not hours > 0:
        raise UserError(f"estimated hours must be positive, got {hours}", field="hours")


def plan_task(
    choice: ResourceChoice,
    num_nodes: int,
    catalog: HasOfferings,
    *,
    enabled_clouds: Collection[str] | None = None,
    blocklist: Sequence[Block] = (),
    minimize: str = "cost",
    hours: float = 1.0,
    max_candidates: int | None = DEFAULT_MAX_CANDIDATES,
) -> list[Candidate]:
    """The failover list for one task, best first. Raises NoOfferingError when nothing fits."""
    check_objective(minimize, hours)
    requests = requests_of(choice)
    index = index_for(catalog, clouds_asked(requests, enabled_clouds))
    candidates: list[Candidate] = []
    ranked = ranked_offerings(
        requests, choice.ordered, index, enabled_clouds, blocklist, minimize, num_nodes, catalog=catalog
    )
    for entry, spot, factor in ranked:
        candidates.append(candidate_from(entry, spot, num_nodes, hours * factor))
        if max_candidates is not None and len(candidates) >= max_candidates:
            break
    if not candidates:  # explained from every cloud: "sold on gcp, not on the aws you pinned"
        raise explain_no_offering(requests, index_for(catalog), enabled_clouds, blocklist, num_nodes)
    return candidates


def ranked_offerings(
    requests: Sequence[ResourceRequest],
    ordered: bool,
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
    num_nodes: int = 1,
    *,
    catalog: HasOfferings | None = None,
) -> Iterator[tuple[Entry, bool, float]]:
    """Every feasible (entry, spot, hours factor) once, best first; lazy, so callers stop early. `catalog`:
    where the first request's instance type is looked up when `index` (the clouds asked) does not sell it."""
    blocks = _blocks_by_cloud(blocklist)
    reference = _reference_speed(requests[0], index, catalog)
    streams = [
        heapq.merge(
            *(
                _request_stream(sized, index, blocks, minimize, reference)
                for sized in sized_requests(r, index, enabled_clouds, num_nodes)
            )
        )
        for r in requests
    ]
    ranked = chain.from_iterable(streams) if ordered else heapq.merge(*streams)
    seen: set[tuple[int, bool]] = set()
    timed = minimize == "time"
    for key, spot in ranked:
        entry: Entry = key[1] if timed else key
        if (entry[5], spot) in seen:
            continue
        seen.add((entry[5], spot))
        yield entry, spot, (key[0] if timed else 1.0)


def candidate_from(entry: Entry, spot: bool, num_nodes: int, hours: float) -> Candidate:
    """The Candidate for one index entry, `num_nodes` VMs for `hours`."""
    price, o = entry[0], entry[6]
    return Candidate(
        cloud=o.cloud,
        region=o.region,
        zone=o.zone,
        instance_type=o.instance_type,
        accelerator=o.accelerator,
        accelerator_count=o.accelerator_count,
        vcpus=o.vcpus,
        memory_gib=o.memory_gib,
        use_spot=spot,
        hourly_price=price,
        num_nodes=num_nodes,
        estimated_hours=hours,
        estimated_cost=num_nodes * price * hours,
    )


def _blocks_by_cloud(blocklist: Sequence[Block]) -> dict[str, list[Block]]:
    blocks: dict[str, list[Block]] = {}
    for block in blocklist:
        blocks.setdefault(block.cloud, []).append(block)
    return blocks


def _reference_speed(
    request: ResourceRequest, index: OfferingIndex, catalog: HasOfferings | None = None
) -> float:
    """The speed of the first requested hardware, the unit of every estimate. A named instance type is that
    type's hardware whichever clouds are enabled (looked up in every cloud's part only when the clouds asked
    do not sell it)."""
    if request.accelerator is not None:
        return hardware_speed(request.accelerator, float(request.accelerator_count or 1), 0.0)
    if request.instance_type is not None:
        keys = index.type_hardware(request.instance_type)
        if not keys and catalog is not None:
            keys = index_for(catalog).type_hardware(request.instance_type)
        if keys:
            return hardware_speed(keys[0][2], keys[0][3], keys[0][4])
    return hardware_speed(None, 0.0, request.cpus or DEFAULT_CPUS)


def _factor(reference: float, key: HardwareKey) -> float:
    """Estimated hours on this hardware per hour on the reference. A CPU-only task on "any" machine
    (a cloud without CPU-only machines) is not sped up by the GPUs it does not use: factor 1."""
    return 1.0 if key == ANY_HARDWARE else reference / _key_speed(key)


def _key_speed(key: HardwareKey) -> float:
    if key[0] == "cpu":
        return hardware_speed(None, 0.0, key[1])
    if key[0] == "gpu":
        return hardware_speed(key[1], key[2], 0.0)
    return hardware_speed(key[2], key[3], key[4])


def _runs(request: ResourceRequest, index: OfferingIndex) -> Iterator[tuple[HardwareKey, tuple[Entry, ...]]]:
    """The sorted runs holding a sized (cloud-pinned) request's candidates, cut at its max_hourly_cost."""
    for key in hardware_keys(request, index):
        families = request.host_families if key[0] == "cpu" else None  # CPU-only keys: the default families
        run = index.run(key, request.use_spot, request.cloud, request.region, families)
        if request.max_hourly_cost is not None:
            run = run[: bisect_right(run, request.max_hourly_cost + 1e-12, key=_price)]
        if run:
            yield key, run


def _request_stream(
    request: ResourceRequest,
    index: OfferingIndex,
    blocks: dict[str, list[Block]],
    minimize: str,
    reference: float,
) -> Iterator[tuple[tuple, bool]]:
    """Feasible entries for one sized alternative on one cloud, in objective order, as (sort key, spot)."""
    runs: list[Iterator[tuple]] = []
    for key, run in _runs(request, index):
        runs.append(iter(run) if minimize == "cost" else _with_hours(_factor(reference, key), run))
    check = _row_check(request, blocks)
    spot = request.use_spot
    for key in heapq.merge(*runs):
        o = key[6] if minimize == "cost" else key[1][6]
        if check is None or check(o):
            yield key, spot


def cheapest_per_shape_and_cloud(
    choice: ResourceChoice,
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
    num_nodes: int = 1,
    *,
    per_region: bool = False,
) -> list[tuple[Entry, bool, float]]:
    """For every alternative, hardware shape and cloud (and region, `per_region`), its cheapest feasible
    entry, best first.

    These are the only candidates that can win when what else matters depends on the cloud (or region)
    alone (egress). For an `ordered` choice, only the first alternative that has any candidate counts.
    """
    requests = requests_of(choice)
    blocks = _blocks_by_cloud(blocklist)
    reference = _reference_speed(requests[0], index)
    groups = [[r] for r in requests] if choice.ordered else [requests]
    for group in groups:
        found: list[tuple[tuple, Entry, bool, float]] = []
        sized = [
            one for request in group for one in sized_requests(request, index, enabled_clouds, num_nodes)
        ]
        for request in sized:
            check = _row_check(request, blocks)
            for key, run in _runs(request, index):
                factor = _factor(reference, key) if minimize == "time" else 1.0
                for entry in _heads(run, check, per_region):
                    rank = (factor, entry) if minimize == "time" else (entry,)
                    found.append((rank, entry, request.use_spot, factor))
        if found:
            found.sort(key=lambda item: (item[0], item[2]))
            return [(entry, spot, factor) for _, entry, spot, factor in found]
    return []


def _heads(run: tuple[Entry, ...], check: Callable[[Offering], bool] | None, per_region: bool) -> list[Entry]:
    """The cheapest feasible entry of a sorted run, or of each region in it."""
    heads: dict[str, Entry] = {}
    for entry in run:
        if entry[2] in heads or (check is not None and not check(entry[6])):
            continue
        heads[entry[2]] = entry
        if not per_region:
            break
    return list(heads.values())


def _with_hours(est: float, run: tuple[Entry, ...]) -> Iterator[tuple[float, Entry]]:
    for entry in run:
        yield est, entry


def _price(entry: Entry) -> float:
    return entry[0]


def _row_check(request: ResourceRequest, blocks: dict[str, list[Block]]) -> Callable[[Offering], bool] | None:
    """The per-offering conditions the hardware key and the run (cloud, region, price) do not enforce."""
    zone = request.zone
    by_key = request.accelerator is None and request.instance_type is None and not request.any_host
    cpus = None if by_key else request.cpus  # CPU-only keys are grouped by vCPUs already
    cpus_at_least = request.cpus_at_least
    memory, memory_at_least = request.memory_gib, request.memory_at_least
    ratio = request.memory_per_vcpu
    families = None if by_key else request.host_families  # CPU-only runs are cut to the families already
    cloud_blocks = blocks.get(request.cloud or "")
    if (
        zone is None
        and cpus is None
        and memory is None
        and ratio is None
        and families is None
        and not cloud_blocks
    ):
        return None

    def check(o: Offering) -> bool:
        if zone is not None and o.zone != zone:
            return False
        if cpus is not None and not fits(o.vcpus, cpus, cpus_at_least):
            return False
        if memory is not None and not fits(o.memory_gib, memory, memory_at_least):
            return False
        if ratio is not None and o.memory_gib < o.vcpus * ratio - 1e-9:
            return False
        if families is not None and not in_families(o.cloud, o.instance_type, families):
            return False
        return not cloud_blocks or not any(
            b.covers(o.cloud, o.region, o.zone, o.instance_type) for b in cloud_blocks
        )

    return check
