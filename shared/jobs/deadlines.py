"""Deadline jobs: the job's deadline and work, checked at submit, and the bridge between a job's records
and the pure policy (`shared.spot_policy`): its places and prices from the plan and the catalog, its state
(now, deadline, work left, the current cluster) and what it has seen of spot capacity per place.

A job with a deadline carries `deadline_at` (epoch seconds), `work_seconds` (the compute it needs on its
planned hardware), `restart_overhead` (seconds a launch costs before the task makes progress again),
`work_done` (seconds, counted when a cluster ends), `market`/`policy_reason` (the policy's last answer),
`spot_history` (JSON: place -> SpotHistory fields) and `overran_at` (when the control plane first saw the
job past its estimate, its timeline noted once).

**Past the estimate**: `--hours` is the user's estimate. Once the work counted (the live cluster's progress
included) reaches it while the task still runs, the rest of the work is unknown, so no slack can be
computed and the policy's plan (spot while the slack allows) no longer holds: the job guards its deadline
as well as it can (`overrun_decision`). A running cluster is kept, spot or on-demand, never moved; after a
preemption or a loss, or from a wait, it launches on-demand at once (no waiting, no spot probe); on
on-demand it stays. Only a plan without an on-demand place leaves it to the policy (spot only).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shared.config import Settings
from shared.errors import UserError
from shared.optimizer.cooling import Cooling, place_of
from shared.optimizer.plan import Block, Candidate
from shared.optimizer.probes import Refusal, SpotProbes, spot_probes
from shared.spot_policy import (
    DeadlineState,
    Decision,
    Market,
    Placement,
    PlaceOption,
    PolicyConfig,
    SpotHistory,
    UseOnDemand,
    UseSpot,
)
from shared.states import is_terminal
from shared.store.models import ClusterModel, JobModel

if TYPE_CHECKING:
    from shared.catalog.model import Catalog

HOUR = 3600.0
MAX_HOURS = 24 * 366
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
DEADLINE_HINT = "a time with a zone, e.g. 2026-12-01T09:00Z, or a duration from now, e.g. 36h, 90m, 2d"


def parse_deadline(text: str, now: float) -> float:
    """`2026-12-01T09:00Z` (any ISO 8601 time with a zone) or a duration from `now` (`36h`, `90m`,
    `2d`, `45s`) -> epoch seconds. UserError(field="deadline") otherwise."""
    raw = text.strip()
    match = _DURATION.match(raw)
    if match:
        return now + float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UserError(f"deadline {text!r} is neither a time nor a duration", field="deadline",
                        hint=DEADLINE_HINT) from None  # fmt: skip
    if when.tzinfo is None:
        raise UserError(f"deadline {text!r} has no time zone", field="deadline",
                        hint="add Z for UTC or an offset such as +02:00")  # fmt: skip
    return when.timestamp()


def deadline_fields(
    settings: Settings, deadline: str | None, hours: float | None, now: float | None = None
) -> dict[str, Any]:
    """The job record's deadline fields from what the user gave (both or neither); UserError naming the
    field when one is missing or the deadline cannot be met even on on-demand (with the arithmetic)."""
    if deadline is None and hours is None:
        return {}
    if hours is None:
        raise UserError("a deadline needs the job's compute time", field="hours",
                        hint="give --hours H: the hours the job runs on its planned hardware")  # fmt: skip
    if deadline is None:
        raise UserError("--hours is only used with a deadline", field="deadline", hint=DEADLINE_HINT)
    if not 0 < hours <= MAX_HOURS:
        raise UserError(f"hours must be above 0 and at most {MAX_HOURS}, not {hours:g}", field="hours")
    now = time.time() if now is None else now
    deadline_at = parse_deadline(deadline, now)
    work = hours * HOUR
    overhead = float(settings.restart_overhead_seconds)
    earliest = now + overhead + work
    if earliest > deadline_at:
        raise UserError(
            f"the deadline cannot be met even on on-demand: it is {_span(deadline_at - now)} away "
            f"({_iso(deadline_at)}), and {_span(overhead)} to start plus {hours:g} h of compute end at "
            f"{_iso(earliest)}, {_span(earliest - deadline_at)} late",
            field="deadline",
            hint="give a later deadline, or fewer --hours",
        )
    return {"deadline_at": deadline_at, "work_seconds": work, "restart_overhead": overhead, "work_done": 0}


def policy_config(settings: Settings) -> PolicyConfig:
    return PolicyConfig(reaction=float(settings.deadline_reaction_seconds),
                        retry=float(settings.deadline_retry_seconds))  # fmt: skip


def place_key(cloud: str, region: str, zone: str | None, instance_type: str) -> str:
    """A place of the policy: where, and what (spot capacity is per zone and instance type)."""
    return f"{'/'.join(p for p in (cloud, region, zone) if p)} {instance_type}"


def policy_places(
    catalog: Catalog, candidates: Sequence[Candidate], blocks: Sequence[Block]
) -> tuple[list[PlaceOption], dict[str, Candidate]]:
    """The plan's candidates not blocked, as places priced for both markets (the whole cluster, $/h)
    from the catalog; a candidate the catalog no longer has keeps its own market's price only."""
    places: list[PlaceOption] = []
    by_key: dict[str, Candidate] = {}
    for candidate in candidates:
        where = (candidate.cloud, candidate.region, candidate.zone, candidate.instance_type)
        if any(b.covers(*where) for b in blocks):
            continue
        key = place_key(candidate.cloud, candidate.region, candidate.zone, candidate.instance_type)
        if key in by_key:
            continue
        offering = next(
            (o for o in catalog.by_instance_type(candidate.cloud, candidate.instance_type)
             if o.region == candidate.region and o.zone == candidate.zone),
            None,
        )  # fmt: skip
        nodes = candidate.num_nodes
        if offering is not None:
            spot = None if offering.spot_price is None else offering.spot_price * nodes
            on_demand: float | None = offering.price * nodes
        else:
            spot = candidate.hourly_price * nodes if candidate.use_spot else None
            on_demand = None if candidate.use_spot else candidate.hourly_price * nodes
        by_key[key] = candidate
        places.append(PlaceOption(key, spot, on_demand, f"{candidate.cloud}/{candidate.region}"))
    return places, by_key


def candidate_for(option: PlaceOption, candidate: Candidate, market: Market) -> Candidate:
    """The plan's candidate at `option`, on `market`, priced per node."""
    price = option.spot_price if market is Market.SPOT else option.on_demand_price
    assert price is not None, "the policy only names markets a place prices"
    per_node = price / candidate.num_nodes
    return dataclasses.replace(
        candidate,
        use_spot=market is Market.SPOT,
        hourly_price=per_node,
        estimated_cost=per_node * candidate.num_nodes * candidate.estimated_hours,
    )


def current_placement(cluster: ClusterModel | None) -> Placement | None:
    if cluster is None or cluster.state != "UP":
        return None
    market = Market.SPOT if cluster.use_spot else Market.ON_DEMAND
    key = place_key(cluster.cloud, cluster.region, cluster.zone, cluster.instance_type)
    return Placement(key, market, float(cluster.launched_at))


def work_counted(job: JobModel, current: Placement | None, now: float) -> float:
    """The work done by the ended clusters and the live cluster's progress so far (seconds)."""
    done = float(job.work_done or 0)
    if current is not None:
        done += max(0.0, now - current.started_at - float(job.restart_overhead or 0))
    return done


def deadline_state(job: JobModel, current: Placement | None, now: float) -> DeadlineState:
    total = float(job.work_seconds or 0)
    return DeadlineState(
        now=now,
        deadline=float(job.deadline_at),
        work_left=max(0.0, total - work_counted(job, current, now)),
        restart_overhead=float(job.restart_overhead or 0),
        total_work=total,
        submitted_at=float(job.created_at),
        current=current,
    )


def past_estimate(state: DeadlineState) -> bool:
    """The work counted has reached the job's `--hours` (the caller knows the task still runs)."""
    return state.total_work > 0 and state.work_left <= 0


def overrun_decision(state: DeadlineState, places: Sequence[PlaceOption]) -> Decision | None:
    """The rule for a job past its estimate (the module's doc), None within it (the policy decides) or when
    no place of the plan offers on-demand. The cheapest on-demand place, the plan's order among equals."""
    if not past_estimate(state):
        return None
    past = f"past its {_span(state.total_work)} estimate"
    current = state.current
    if current is not None:
        kept = UseSpot if current.market is Market.SPOT else UseOnDemand
        return kept(current.place, f"{past}: the running cluster is kept")
    cheapest = cheapest_on_demand(places)
    if cheapest is None:
        return None
    return UseOnDemand(cheapest.place, f"{past}: on-demand, the rest of the work being unknown")


def cheapest_on_demand(places: Sequence[PlaceOption]) -> PlaceOption | None:
    """The plan's cheapest on-demand place (its order among equals), None when it offers none."""
    offered = [p for p in places if p.on_demand_price is not None]
    return min(offered, key=lambda p: p.on_demand_price or 0.0) if offered else None


OVERRUN_KIND = "overrun"  # the first decision past the estimate: its event (shared/notifications tells it)


def overrun_note(job: JobModel, on_demand: bool = True) -> str:
    """The timeline's words, once, when the job is first seen past its estimate. `on_demand`: the plan
    offers it (without, the policy keeps the job on spot)."""
    then = (
        "after a preemption the job restarts on on-demand at once and stays there"
        if on_demand
        else "the plan has no on-demand place, so after a preemption it waits for spot"
    )
    return (
        f"ran its estimated {_span(float(job.work_seconds or 0))} of compute and is still running; the "
        "rest is unknown, so the deadline is guarded as well as it can be: a running cluster is kept, and "
        f"{then}"
    )


def overrun_facts(
    job: JobModel, state: DeadlineState, cluster: ClusterModel | None, places: Sequence[PlaceOption]
) -> dict[str, Any]:
    """What the overrun event records for its notification (shared/notifications/overruns.py): the
    estimate, the work counted and the deadline (seconds, epoch), the cluster kept (None: none runs, the
    job is being launched) and where it goes after a preemption, with the prices per hour of the whole
    cluster. A key whose value is unknown is left out."""
    facts: dict[str, Any] = {
        "estimate": state.total_work,
        "work_counted": round(work_counted(job, state.current, state.now), 3),
        "deadline_at": state.deadline,
        "at": state.now,
    }
    current = state.current
    by_place = {p.place: p for p in places}
    if current is not None and cluster is not None:
        price = None if cluster.hourly_price is None else float(cluster.hourly_price) * int(cluster.num_nodes)
        facts["running"] = {"market": current.market.value, "place": current.place, "hourly_price": price}
    cheapest = cheapest_on_demand(places)
    if cheapest is not None:
        facts["on_demand"] = {"place": cheapest.place, "hourly_price": cheapest.on_demand_price}
    spot = [p.spot_price for p in places if p.spot_price is not None]
    here = by_place.get(current.place) if current is not None else None
    spot_price = (
        here.spot_price if here is not None and here.spot_price is not None else min(spot, default=None)
    )
    if spot_price is not None:
        facts["spot_hourly_price"] = spot_price
    return {key: value for key, value in facts.items() if value is not None}


def estimate_reached_at(
    job: JobModel, state: DeadlineState, grace: float, launched_at: float | None = None
) -> float | None:
    """`grace` seconds after the work counted reaches the job's estimate on the cluster it runs (or the one
    launched at `launched_at`): the check that notes and tells the overrun when it happens, and not for a
    task that ends on its estimate but reports a little later. None once noted, or for a job already past it
    (the decision at hand notes it)."""
    if job.overran_at is not None or state.total_work <= 0 or state.work_left <= 0:
        return None
    if launched_at is not None:
        return launched_at + state.restart_overhead + state.work_left + grace
    return state.now + state.overhead_left + state.work_left + grace


def earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def with_shared_evidence(
    history: dict[str, SpotHistory], by_key: dict[str, Candidate], cooling: Sequence[Cooling]
) -> dict[str, SpotHistory]:
    """The job's own spot history, plus what every job has seen: a spot launch refused in a place's zone
    (the latest one a cooling zone holds) counts as refused there, unless this job has seen spot there
    since. So the policy does not probe a zone another job just found without spot."""
    refused = {c.place: c.last_refused for c in cooling if c.scope == "zone" and c.last_refused is not None}
    if not refused:
        return history
    out = dict(history)
    for key, candidate in by_key.items():
        at = refused.get(place_of(candidate.cloud, candidate.region, candidate.zone))
        if at is None:
            continue
        known = out.get(key, SpotHistory())
        seen_since = known.last_available is not None and known.last_available >= at
        if not seen_since and (known.last_unavailable is None or known.last_unavailable < at):
            out[key] = known.refused(at)
    return out


def probe_view(
    history: dict[str, SpotHistory], by_key: dict[str, Candidate], probes: SpotProbes, retry: float
) -> dict[str, SpotHistory]:
    """The history as the policy is to see it: a place whose zone the evidence says not to probe yet (see
    shared/optimizer/probes.py), or any place once the job reached its hourly limit, as refused until then:
    the policy turns to the plan's other zones or, none left, waits or runs on-demand as it would after
    refusals of its own. A zone's wait does not hold for a job that has seen spot there since the zone's
    latest refusal. For `decide` only: never saved."""
    out = dict(history)
    for key, candidate in by_key.items():
        known = out.get(key, SpotHistory())
        zone_place = place_of(candidate.cloud, candidate.region, candidate.zone)
        zone = probes.zones.get(zone_place)
        seen = known.last_available
        seen_since = zone is not None and seen is not None and seen > zone.last_refused
        until = probes.budget_until() if seen_since else probes.not_before(zone_place)
        if until is None:
            continue
        shown = until - retry  # `unavailable_at(now, retry)` holds until `until`
        out[key] = dataclasses.replace(
            known,
            last_unavailable=max(shown, known.last_unavailable or shown),
            last_available=None if seen is None else min(seen, shown),
        )
    return out


def job_probes(
    settings: Settings,
    job_id: str,
    refusals: Mapping[str, Sequence[Refusal]],
    now: float,
    history: Mapping[str, SpotHistory],
) -> SpotProbes:
    """The zones' waits and the job's hourly budget (shared/optimizer/probes.py) as this job obeys them. A
    zone's wait counts only the refusals since the job last got spot there: that launch ended the outage they
    were evidence of, so a preemption after a long run is not met with the backoff of the outage before it.
    The budget counts every refusal of the job."""
    retry, per_hour = float(settings.deadline_retry_seconds), int(settings.spot_refusals_per_hour)
    probes = spot_probes(refusals, job_id, now, retry=retry, per_hour=per_hour)
    seen: dict[str, float] = {}
    for key, known in history.items():
        zone = key.split(" ", 1)[0]  # place_key: "cloud/region/zone instance-type"
        if known.last_available is not None and known.last_available > seen.get(zone, 0.0):
            seen[zone] = known.last_available
    if not seen:
        return probes
    since = {zone: [r for r in listed if r[0] > seen.get(zone, 0.0)] for zone, listed in refusals.items()}
    zones = spot_probes(since, job_id, now, retry=retry, per_hour=per_hour).zones
    return dataclasses.replace(probes, zones=zones)


def history_of(job: JobModel) -> dict[str, SpotHistory]:
    """The job's stored history; fields this version does not know (written by a newer one, before a
    rollback) are dropped, so the job goes on with what it knows."""
    raw = json.loads(job.spot_history) if job.spot_history else {}
    known = {spec.name for spec in dataclasses.fields(SpotHistory)}
    return {
        place: SpotHistory(**{name: value for name, value in fields.items() if name in known})
        for place, fields in raw.items()
    }


def history_json(history: dict[str, SpotHistory]) -> str:
    return json.dumps({place: dataclasses.asdict(h) for place, h in sorted(history.items())})


def cluster_ended(
    job: JobModel, cluster: ClusterModel | None, *, preempted: bool, now: float
) -> dict[str, Any]:
    """The job changes when its cluster ends (preempted, or let go for the policy): the work it did,
    and for spot what the place showed of its capacity. Empty for a job without a deadline."""
    if not job.deadline_at or cluster is None or cluster.state != "UP":
        return {}
    overhead = float(job.restart_overhead or 0)
    done = float(job.work_done or 0) + max(0.0, now - float(cluster.launched_at) - overhead)
    changes: dict[str, Any] = {"work_done": done, "market": None}  # past the estimate too: status shows it
    if cluster.use_spot:
        history = history_of(job)
        key = place_key(cluster.cloud, cluster.region, cluster.zone, cluster.instance_type)
        started = float(cluster.launched_at)
        history[key] = history.get(key, SpotHistory()).ran(started, now, preempted=preempted)
        changes["spot_history"] = history_json(history)
    return changes


@dataclasses.dataclass(frozen=True)
class DeadlineView:
    """What `skyless status` shows of a deadline job."""

    deadline: str
    hours: float
    work_done_hours: float
    slack_hours: float
    market: str | None
    why: str | None
    past_estimate: bool = False  # the work done reached `hours` before the task ended

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def deadline_view(
    job: JobModel, cluster: ClusterModel | None, now: float | None = None
) -> DeadlineView | None:
    if not job.deadline_at:
        return None
    now = time.time() if now is None else now
    live = cluster if job.state in ("SETTING_UP", "RUNNING") else None
    current = current_placement(live)
    state = deadline_state(job, current, now)
    done = work_counted(job, current, now)
    if job.state == "SUCCEEDED":
        done = max(done, state.total_work)
    past = job.overran_at is not None or (not is_terminal(job.state) and past_estimate(state))
    return DeadlineView(
        deadline=_iso(float(job.deadline_at)),
        hours=round(state.total_work / HOUR, 4),
        work_done_hours=round(done / HOUR, 4),
        slack_hours=round(state.slack / HOUR, 4),
        market=job.market,
        why=job.policy_reason,
        past_estimate=past,
    )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds >= HOUR:
        return f"{seconds / HOUR:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
