"""Why a plan is what it is, in words a user reads beside the plan table.

`why_chosen` says why each task's chosen place won: the cheapest (or fastest) feasible offering, the
first `ordered` alternative that fits, the data it would otherwise move (egress), or cheaper places a
blocklist rules out. `missing_clouds` says why a cloud of the catalog offers nothing for a task (no
such machine there, no spot market, no multi-node clusters, not enabled). Planning-time only: these
re-plan small variants of the task, which is cheap next to reading them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from shared.errors import NoOfferingError
from shared.optimizer.index import HasOfferings
from shared.optimizer.pipeline import input_source, pipeline_edges
from shared.optimizer.placement import egress_cost
from shared.optimizer.plan import Block, Candidate, Plan
from shared.optimizer.single_task import plan_task
from shared.task.requests import ResourceChoice


def describe_candidate(c: Candidate) -> str:
    """`aws m6i.2xlarge in us-east-1a, spot, $0.15/h`; at a team's price, `... $8.78/h (list $21.96/h)`."""
    market = ", spot" if c.use_spot else ""
    listed = f" (list ${c.list_price:.2f}/h)" if c.list_price is not None else ""
    return f"{c.cloud} {c.instance_type} in {c.zone or c.region}{market}, ${c.hourly_price:.2f}/h{listed}"


def _own_plan(
    task: Any,
    catalog: HasOfferings,
    enabled: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
    choice: ResourceChoice | None = None,
) -> list[Candidate]:
    try:
        return plan_task(
            choice or task.resource_choice(),
            task.num_nodes,
            catalog,
            enabled_clouds=enabled,
            blocklist=blocklist,
            minimize=minimize,
            max_candidates=None,
        )
    except NoOfferingError:
        return []


def _same_place(a: Candidate, b: Candidate) -> bool:
    return (a.cloud, a.region, a.zone, a.instance_type, a.use_spot) == (
        b.cloud,
        b.region,
        b.zone,
        b.instance_type,
        b.use_spot,
    )


def why_chosen(
    pipeline: Any,
    plan: Plan,
    catalog: HasOfferings,
    *,
    enabled_clouds: Collection[str] | None = None,
    blocklist: Sequence[Block] = (),
) -> list[str]:
    """One sentence per task: why its chosen candidate won."""
    reasons: list[str] = []
    edges = pipeline_edges(pipeline)
    sources = [s for i, t in enumerate(pipeline.tasks) if (s := input_source(t, i)) is not None]
    chosen = [t.chosen for t in plan.tasks]
    for position, (task, task_plan) in enumerate(zip(pipeline.tasks, plan.tasks, strict=True)):
        own = _own_plan(task, catalog, enabled_clouds, blocklist, plan.objective)
        pick = task_plan.chosen
        choice = task.resource_choice()
        if pick.reservation is not None:
            cheapest = f"; cheapest at list: {describe_candidate(own[0])}" if own else ""
            reason = f"free reserved capacity in {pick.reservation}, already paid{cheapest}"
        elif choice.ordered and len(choice.requests) > 1:
            reason = _ordered_reason(task, choice, catalog, enabled_clouds, blocklist, plan.objective)
        elif own and not _same_place(own[0], pick):
            reason = _egress_reason(position, pick, own[0], chosen, edges, sources)
        else:
            kind = "fastest, then cheapest," if plan.objective == "time" else "cheapest"
            market = " spot" if pick.use_spot else ""
            clouds = len({c.cloud for c in own})
            reason = f"the {kind} of {len(own)} feasible{market} offerings on {clouds} cloud(s)"
        if blocklist:
            free = _own_plan(task, catalog, enabled_clouds, (), plan.objective)
            blocked = [
                c
                for c in free
                if any(b.covers(c.cloud, c.region, c.zone, c.instance_type) for b in blocklist)
            ]
            if free and blocked and _same_place(free[0], blocked[0]):
                why = _block_reason(blocked[0], blocklist)
                reason += f"; cheaper {describe_candidate(blocked[0])} is blocked ({why})"
        label = task_plan.task_name or f"task #{position + 1}"
        reasons.append(f"{label}: {describe_candidate(pick)}: {reason}")
    return reasons


def _block_reason(c: Candidate, blocklist: Sequence[Block]) -> str:
    block = next(b for b in blocklist if b.covers(c.cloud, c.region, c.zone, c.instance_type))
    return block.reason or "failed before"


def _ordered_reason(
    task: Any,
    choice: ResourceChoice,
    catalog: HasOfferings,
    enabled: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
) -> str:
    for number, request in enumerate(choice.requests, start=1):
        if _own_plan(task, catalog, enabled, blocklist, minimize, ResourceChoice((request,))):
            skipped = ""
            if number == 2:
                skipped = "; alternative 1 has no offering"
            elif number > 2:
                skipped = f"; alternatives 1-{number - 1} have no offering"
            return f"alternative {number} is the first in the order written that fits{skipped}"
    return "the first alternative in the order written that fits"


def _egress_reason(
    position: int,
    pick: Candidate,
    cheapest: Candidate,
    chosen: list[Candidate],
    edges: Sequence[Any],
    sources: Sequence[Any],
) -> str:
    def moved(c: Candidate) -> tuple[float, float]:
        cost, gigabytes = 0.0, 0.0
        for s in sources:
            if s.target == position:
                cost += egress_cost(s.cloud, c.cloud, s.gigabytes)
                gigabytes += s.gigabytes if s.cloud != c.cloud else 0.0
        for e in edges:
            other = (
                chosen[e.source]
                if e.target == position
                else chosen[e.target]
                if e.source == position
                else None
            )
            if other is None:
                continue
            source, target = (other.cloud, c.cloud) if e.target == position else (c.cloud, other.cloud)
            cost += egress_cost(source, target, e.gigabytes)
            gigabytes += e.gigabytes if source != target else 0.0
        return cost, gigabytes

    here, _ = moved(pick)
    there, gigabytes = moved(cheapest)
    if there > here:
        return (
            f"{describe_candidate(cheapest)} is cheaper per hour, but the {gigabytes:g} GB this task moves "
            f"would cost ${there:.2f} in egress there and ${here:.2f} here"
        )
    return f"chosen jointly with the other tasks (cheapest alone: {describe_candidate(cheapest)})"


def missing_clouds(
    task: Any,
    catalog: Any,
    *,
    listed: Collection[str],
    enabled_clouds: Collection[str] | None = None,
    minimize: str = "cost",
) -> dict[str, str]:
    """{cloud: why it has no candidate} for each catalog cloud not in `listed`."""
    reasons: dict[str, str] = {}
    for cloud in catalog.clouds():
        if cloud in listed:
            continue
        if enabled_clouds is not None and cloud not in enabled_clouds:
            reasons[cloud] = "not among the clouds asked for (--clouds)"
            continue
        choice = task.resource_choice()
        here = [replace(r, cloud=cloud) for r in choice.requests if r.cloud in (None, cloud)]
        if choice.requests and not here:
            asked = ", ".join(sorted({r.cloud for r in choice.requests if r.cloud}))
            reasons[cloud] = f"the task asks for {asked}"
            continue
        try:
            plan_task(ResourceChoice(tuple(here), choice.ordered), task.num_nodes, catalog, minimize=minimize)
        except NoOfferingError as error:
            reasons[cloud] = error.message.removeprefix("no offering fits ")
        else:
            reasons[cloud] = "has offerings"  # not expected: the caller listed every cloud that has one
    return reasons
