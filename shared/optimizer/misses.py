"""Why nothing fits: the nearest misses for a request the catalog cannot satisfy.

Each condition of a request is applied in turn to the offerings with its hardware, and the first
condition that leaves nothing is the reason given ("A100:3 exists only as A100:1, 2, 4, 8",
"not offered on aws; offered on gcp, azure", "blocked by ..."). This is the error path only, so it
scans; the planner's fast path never comes here unless the answer is empty.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Sequence

from shared.catalog.offering import Offering
from shared.errors import NoOfferingError
from shared.optimizer.errors import dotted
from shared.optimizer.host_defaults import in_families, multi_node_supported, sized_for
from shared.optimizer.index import OfferingIndex, fits, hardware_keys
from shared.optimizer.plan import Block
from shared.task.requests import ResourceRequest

_LIST_AT_MOST = 8


def explain_no_offering(
    requests: Sequence[ResourceRequest],
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    num_nodes: int = 1,
) -> NoOfferingError:
    """A NoOfferingError naming what was asked and, per alternative, the nearest miss.

    The error's `field` is the task-file field of the first alternative's miss (`resources.cpus`,
    `resources.any_of[1].accelerators`, `num_nodes`); `paths` lists where that field may be written,
    most specific first, so a caller holding the file's text can find its line (shared.optimizer.errors).
    """
    reasons: list[str] = []
    hints: list[str] = []
    paths: list[tuple[str | int, ...]] = []
    for request in requests:
        reason, hint, fields = _nearest_miss(request, index, enabled_clouds, blocklist, num_nodes)
        reasons.append(f"{describe_request(request)}: {reason}")
        if hint:
            hints.append(hint)
        if not paths:
            paths = _field_paths(request, fields)
    message = "no offering fits " + "; nor ".join(reasons)
    error = NoOfferingError(
        message,
        field=dotted(paths[0]) if paths else "resources",
        hint="; ".join(dict.fromkeys(hints)) or None,
    )
    error.paths = paths or [("resources",)]  # type: ignore[attr-defined]
    return error


def _field_paths(request: ResourceRequest, fields: Sequence[str]) -> list[tuple[str | int, ...]]:
    """Where the fields behind a miss may be written: the alternative's own entry, then the shared one."""
    paths: list[tuple[str | int, ...]] = []
    for name in fields:
        if name in TASK_LEVEL_FIELDS or name.startswith("--"):
            paths.append((name,))
            continue
        if len(request.source) > 1:
            paths.append((*request.source, name))
        paths.append(("resources", name))
    return paths


def describe_request(request: ResourceRequest) -> str:
    """`A100:8 spot in gcp/us-central1, 16+ vCPUs, at most $20/h`: what the user asked, briefly."""
    parts: list[str] = []
    if request.accelerator is not None:
        parts.append(f"{request.accelerator}:{_number(request.accelerator_count or 1)}")
    if request.instance_type is not None:
        parts.append(request.instance_type)
    if request.cpus is not None:
        parts.append(f"{_number(request.cpus)}{'+' if request.cpus_at_least else ''} vCPUs")
    if request.memory_gib is not None:
        parts.append(f"{_number(request.memory_gib)}{'+' if request.memory_at_least else ''} GiB memory")
    text = ", ".join(parts) or "any VM"
    if request.use_spot:
        text += " spot"
    place = "/".join(p for p in (request.cloud, request.region, request.zone) if p)
    if place:
        text += f" in {place}"
    if request.max_hourly_cost is not None:
        text += f" at most ${request.max_hourly_cost:g}/h"
    return text


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _some(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LIST_AT_MOST])
    return shown + (f" and {len(names) - _LIST_AT_MOST} more" if len(names) > _LIST_AT_MOST else "")


def _close(word: str, choices: Sequence[str], cutoff: float = 0.6) -> list[str]:
    lowered = {c.casefold(): c for c in choices}
    matches = difflib.get_close_matches(word.casefold(), list(lowered), n=3, cutoff=cutoff)
    return [lowered[m] for m in matches]


TASK_LEVEL_FIELDS = frozenset({"num_nodes"})
_LOCATION = ("infra", "cloud")


def _nearest_miss(
    request: ResourceRequest,
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    num_nodes: int,
) -> tuple[str, str | None, tuple[str, ...]]:
    """(reason, hint, the fields to blame) for one alternative that nothing fits."""
    acc, count = request.accelerator, float(request.accelerator_count or 1)
    if request.instance_type is not None and not index.type_hardware(request.instance_type):
        near = _close(request.instance_type, index.instance_types())
        hint = f"did you mean {' or '.join(near)}?" if near else None
        return f"no instance type {request.instance_type} in the catalog", hint, ("instance_type",)
    if acc is not None and not index.accelerator_counts(acc):
        near = _close(acc, index.accelerator_names())
        hint = f"did you mean {' or '.join(near)}?" if near else None
        return f"no accelerator {acc} in the catalog", hint, ("accelerators",)
    if acc is not None and request.instance_type is None and count not in index.accelerator_counts(acc):
        sold = ", ".join(_number(c) for c in index.accelerator_counts(acc))
        return f"{acc}:{_number(count)} exists only as {acc}:{sold}", None, ("accelerators",)
    clouds = sorted(index.clouds) if request.cloud is None else [request.cloud]
    sized = {c: one for c in clouds if (one := sized_for(request, c, 1)) is not None}
    rows = [
        e[6]
        for one in sized.values()
        for key in hardware_keys(one, index)
        for e in index.run(key, False, one.cloud)
    ]
    if not rows:
        blame = _LOCATION if request.cloud is not None else ("cpus",) if acc is None else ("accelerators",)
        return _no_hardware(request, index), None, blame
    # The machine steps depend on the machine alone: judged once per instance type, not once per row.
    shapes = {(o.cloud, o.instance_type, o.vcpus, o.memory_gib): o for o in rows}
    machine = {
        name: {shape for shape, o in shapes.items() if keep(o)}
        for name, keep in (
            ("vCPUs", lambda o: fits(o.vcpus, sized[o.cloud].cpus, sized[o.cloud].cpus_at_least)),
            ("memory", lambda o: _memory_fits(o, sized[o.cloud])),
            ("host", lambda o: in_families(o.cloud, o.instance_type, sized[o.cloud].host_families)),
        )
    }

    def shape_in(name: str) -> Callable[[Offering], bool]:
        return lambda o: (o.cloud, o.instance_type, o.vcpus, o.memory_gib) in machine[name]

    steps: tuple[tuple[str, tuple[str, ...], Callable[[Offering], bool]], ...] = (
        ("vCPUs", ("cpus",), shape_in("vCPUs")),
        ("memory", ("memory",), shape_in("memory")),
        ("host", ("cpus", "memory"), shape_in("host")),
        ("enabled", ("--clouds",), lambda o: enabled_clouds is None or o.cloud in enabled_clouds),
        ("multi-node", ("num_nodes",), lambda o: num_nodes <= 1 or multi_node_supported(o.cloud)),
        ("region", ("region", *_LOCATION), lambda o: request.region is None or o.region == request.region),
        ("zone", ("zone", *_LOCATION), lambda o: request.zone is None or o.zone == request.zone),
        ("spot", ("use_spot",), lambda o: not request.use_spot or o.spot_price is not None),
    )
    for name, fields, keep in steps:
        kept = [o for o in rows if keep(o)]
        if not kept:
            why = _why_empty(name, request, rows, enabled_clouds, sized, num_nodes)
            return why, _place_hint(name, request, rows), fields
        rows = kept
    if request.max_hourly_cost is not None:
        limit = request.max_hourly_cost
        cheapest = min(o.hourly_price(request.use_spot) or 0.0 for o in rows)
        if cheapest > limit:
            market = " (spot)" if request.use_spot else ""
            why = f"the cheapest is ${cheapest:g}/h{market}, above max_hourly_cost ${limit:g}/h"
            return why, None, ("max_hourly_cost",)
        rows = [o for o in rows if (o.hourly_price(request.use_spot) or 0.0) <= limit]
    covering = [
        b for b in blocklist if any(b.covers(o.cloud, o.region, o.zone, o.instance_type) for o in rows)
    ]
    if covering:
        why = _some(list(dict.fromkeys(_describe_block(b) for b in covering)))
        return f"all {len(rows)} matching places are blocked by {why}", None, ()
    return "nothing matched", None, ()


def _memory_fits(o: Offering, request: ResourceRequest) -> bool:
    if request.memory_per_vcpu is not None and o.memory_gib < o.vcpus * request.memory_per_vcpu - 1e-9:
        return False
    return fits(o.memory_gib, request.memory_gib, request.memory_at_least)


def _no_hardware(request: ResourceRequest, index: OfferingIndex) -> str:
    if request.cloud is not None and request.cloud not in index.clouds:
        return f"not offered on {request.cloud}: the catalog has clouds {_some(sorted(index.clouds))}"
    if request.instance_type is not None:
        carried = ", ".join(
            f"{k[2]}:{_number(k[3])}" if k[2] else "no accelerator"
            for k in index.type_hardware(request.instance_type)
        )
        where = f" on {request.cloud}" if request.cloud else ""
        return f"{request.instance_type}{where} comes with {carried}"
    if request.accelerator is not None:
        key = ("gpu", request.accelerator, float(request.accelerator_count or 1))
        sellers = sorted({e[1] for e in index.run(key, False)})
        return f"not offered on {request.cloud}; offered on {_some(sellers)}"
    largest = index.cpu_vcpus[-1] if index.cpu_vcpus else 0
    return f"no CPU-only VM has that many vCPUs (the largest has {_number(largest)})"


def _describe_block(block: Block) -> str:
    place = "/".join(p for p in (block.cloud, block.region, block.zone) if p)
    family = f" ({block.instance_family} family)" if block.instance_family else ""
    return f"{place}{family}" + (f": {block.reason}" if block.reason else "")


def _place_hint(step: str, request: ResourceRequest, rows: list[Offering]) -> str | None:
    if step == "region" and request.region:
        near = _close(request.region, sorted({o.region for o in rows}), cutoff=0.8)
    elif step == "zone" and request.zone:
        near = _close(request.zone, sorted({o.zone for o in rows if o.zone}), cutoff=0.8)
    else:
        return None
    return f"did you mean {' or '.join(near)}?" if near else None


def _why_empty(
    step: str,
    request: ResourceRequest,
    rows: list[Offering],
    enabled_clouds: Collection[str] | None,
    sized: dict[str, ResourceRequest],
    num_nodes: int,
) -> str:
    if step == "vCPUs":
        have = sorted({o.vcpus for o in rows})
        wanted = _defaults_said(request, sized)
        return f"it comes with {_some([_number(v) for v in have])} vCPUs{wanted}"
    if step == "memory":
        have = sorted({o.memory_gib for o in rows})
        return f"it comes with {_some([_number(v) for v in have])} GiB memory{_defaults_said(request, sized)}"
    if step == "host":
        families = sorted({f for one in sized.values() for f in one.host_families or ()})
        return (
            "no machine of the families SkyPilot gives a CPU-only task fits "
            f"({_some(families)}; name an instance_type to use another)"
        )
    if step == "multi-node":
        names = sorted({o.cloud for o in rows})
        verb = "runs" if len(names) == 1 else "run"
        return f"{_some(names)} {verb} no multi-node clusters (num_nodes: {num_nodes}), as in SkyPilot"
    if step == "enabled":
        enabled = ", ".join(sorted(enabled_clouds or ())) or "none"
        return f"offered only on {_some(sorted({o.cloud for o in rows}))}, not enabled (enabled: {enabled})"
    if step == "region":
        regions = sorted({o.region for o in rows})
        return f"not offered in {request.region}; regions that have it: {_some(regions)}"
    if step == "zone":
        zone_names = sorted({o.zone for o in rows if o.zone})
        have_zones = _some(zone_names) or "none (priced per region)"
        return f"not offered in zone {request.zone}; zones that have it: {have_zones}"
    return "no spot market for it there (on-demand only)"


def _defaults_said(request: ResourceRequest, sized: dict[str, ResourceRequest]) -> str:
    """` (SkyPilot's default for a task that names none: 8+ vCPUs on aws, ...)` when defaults applied."""
    if request.cpus is not None or request.memory_gib is not None or request.memory_per_vcpu is not None:
        return ""
    said = []
    for cloud, one in sorted(sized.items()):
        parts = []
        if one.cpus is not None:
            parts.append(f"{_number(one.cpus)}+ vCPUs")
        if one.memory_gib is not None:
            parts.append(f"{_number(one.memory_gib)}+ GiB")
        if one.memory_per_vcpu is not None:
            parts.append(f"{_number(one.memory_per_vcpu)} GiB per vCPU")
        if parts:
            said.append(f"{' and '.join(parts)} on {cloud}")
    return f" (SkyPilot's default when a task names none: {'; '.join(said)})" if said else ""
