"""Why nothing fits: the nearest misses for a request the catalog cannot satisfy.

Each condition of a request is applied in turn to the offerings with its hardware, and the first
condition that leaves nothing is the reason given ("A100:3 exists only as A100:1, 2, 4, 8",
"not offered on aws; offered on gcp, azure", "blocked by ..."). This is the error path only, so it
scans; the planner's fast path never comes here unless the answer is empty.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from shared.catalog.offering import Offering
from shared.errors import NoOfferingError
from shared.optimizer.index import OfferingIndex, fits, hardware_keys
from shared.optimizer.plan import Block
from shared.task.requests import ResourceRequest

_LIST_AT_MOST = 8


def explain_no_offering(
    requests: Sequence[ResourceRequest],
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
) -> NoOfferingError:
    """A NoOfferingError naming what was asked and, per alternative, the nearest miss."""
    reasons: list[str] = []
    hints: list[str] = []
    for request in requests:
        reason, hint = _nearest_miss(request, index, enabled_clouds, blocklist)
        reasons.append(f"{describe_request(request)}: {reason}")
        if hint:
            hints.append(hint)
    message = "no offering fits " + "; nor ".join(reasons)
    return NoOfferingError(message, field="resources", hint="; ".join(dict.fromkeys(hints)) or None)


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


def _nearest_miss(
    request: ResourceRequest,
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
) -> tuple[str, str | None]:
    acc, count = request.accelerator, float(request.accelerator_count or 1)
    if request.instance_type is not None and not index.type_hardware(request.instance_type):
        near = _close(request.instance_type, index.instance_types())
        return f"no instance type {request.instance_type} in the catalog", (
            f"did you mean {' or '.join(near)}?" if near else None
        )
    if acc is not None and not index.accelerator_counts(acc):
        near = _close(acc, index.accelerator_names())
        hint = f"did you mean {' or '.join(near)}?" if near else None
        return f"no accelerator {acc} in the catalog", hint
    if acc is not None and request.instance_type is None and count not in index.accelerator_counts(acc):
        sold = ", ".join(_number(c) for c in index.accelerator_counts(acc))
        return f"{acc}:{_number(count)} exists only as {acc}:{sold}", None
    keys = hardware_keys(request, index)
    if not keys:
        if request.instance_type is not None:
            carried = ", ".join(
                f"{k[2]}:{_number(k[3])}" if k[2] else "no accelerator"
                for k in index.type_hardware(request.instance_type)
            )
            return f"{request.instance_type} comes with {carried}", None
        largest = index.cpu_vcpus[-1] if index.cpu_vcpus else 0
        return f"no CPU-only VM has that many vCPUs (the largest has {_number(largest)})", None
    rows: list[Offering] = [e[6] for key in keys for e in index.run(key, False)]
    steps = (
        ("vCPUs", lambda o: fits(o.vcpus, request.cpus, request.cpus_at_least)),
        ("memory", lambda o: fits(o.memory_gib, request.memory_gib, request.memory_at_least)),
        ("cloud", lambda o: request.cloud is None or o.cloud == request.cloud),
        ("enabled", lambda o: enabled_clouds is None or o.cloud in enabled_clouds),
        ("region", lambda o: request.region is None or o.region == request.region),
        ("zone", lambda o: request.zone is None or o.zone == request.zone),
        ("spot", lambda o: not request.use_spot or o.spot_price is not None),
    )
    for name, keep in steps:
        kept = [o for o in rows if keep(o)]
        if not kept:
            return _why_empty(name, request, rows, enabled_clouds), _place_hint(name, request, rows)
        rows = kept
    if request.max_hourly_cost is not None:
        limit = request.max_hourly_cost
        cheapest = min(o.hourly_price(request.use_spot) or 0.0 for o in rows)
        if cheapest > limit:
            return f"the cheapest is ${cheapest:g}/h, above max_hourly_cost ${limit:g}/h", None
        rows = [o for o in rows if (o.hourly_price(request.use_spot) or 0.0) <= limit]
    covering = [
        b for b in blocklist if any(b.covers(o.cloud, o.region, o.zone, o.instance_type) for o in rows)
    ]
    if covering:
        why = _some(list(dict.fromkeys(_describe_block(b) for b in covering)))
        return f"all {len(rows)} matching places are blocked by {why}", None
    return "nothing matched", None


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
    step: str, request: ResourceRequest, rows: list[Offering], enabled_clouds: Collection[str] | None
) -> str:
    if step == "vCPUs":
        have = sorted({o.vcpus for o in rows})
        return f"it comes with {_some([_number(v) for v in have])} vCPUs"
    if step == "memory":
        have = sorted({o.memory_gib for o in rows})
        return f"it comes with {_some([_number(v) for v in have])} GiB memory"
    if step == "cloud":
        return f"not offered on {request.cloud}; offered on {_some(sorted({o.cloud for o in rows}))}"
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
