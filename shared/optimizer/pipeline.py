"""Plan a pipeline jointly: where each task runs, counting the data moved between clouds.

The graph: a serial pipeline is a chain, a parallel job group has no edges, and `edges=` gives any
other DAG. An edge u -> v carries `u.outputs_gb` (or, when u declares none, `v.inputs_gb`). A task
with no parent whose `inputs` name a bucket (`s3://` -> aws, `gs://` -> gcp, `az://` or
`https://<account>.blob.core.windows.net` -> azure, `r2://` -> cloudflare) reads them from that
cloud: a `Source`. Costs and solvers are in shared.optimizer.placement.

Each task's options are the candidates no other candidate of the same cloud beats on both hours and
cost (under the cost objective: the cheapest per cloud). Egress depends only on the two clouds, so
this reduction loses no optimum. Under the cost objective, without data to move, each task takes
the head of its own failover list. A TaskPlan's candidates are the chosen one, then the rest of its
failover list, re-ranked by what each place would cost with the data it must move given where the
other tasks were placed (stable, so ties keep the task's own order; `ordered` tasks keep theirs).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from shared.errors import NoOfferingError
from shared.optimizer.contract_pricing import (
    TeamPrices,
    contract_notes,
    reserved_candidates,
    team_catalog,
    with_list_prices,
)
from shared.optimizer.gravity_notes import gravity_notes
from shared.optimizer.index import HasOfferings, OfferingIndex, index_for
from shared.optimizer.placement import Edge, Source, arrival_cost, egress_cost, solve, total_egress_cost
from shared.optimizer.plan import Block, Candidate, Plan, TaskPlan
from shared.optimizer.single_task import (
    DEFAULT_MAX_CANDIDATES,
    candidate_from,
    cheapest_per_shape_and_cloud,
    check_objective,
    plan_task,
)
from shared.task.requests import ResourceChoice

BUCKET_CLOUDS: dict[str, str] = {"s3": "aws", "gs": "gcp", "az": "azure", "r2": "cloudflare"}


class PlannableTask(Protocol):
    @property
    def name(self) -> str | None: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def inputs_gb(self) -> float: ...
    @property
    def outputs_gb(self) -> float: ...

    def resource_choice(self) -> ResourceChoice: ...


class PlannablePipeline(Protocol):
    @property
    def execution(self) -> str: ...
    @property
    def tasks(self) -> Sequence[PlannableTask]: ...


def pipeline_edges(pipeline: PlannablePipeline) -> list[Edge]:
    """Serial pipelines are chains; parallel job groups have no data edges."""
    if pipeline.execution == "parallel":
        return []
    tasks = pipeline.tasks
    return [
        Edge(i, i + 1, tasks[i].outputs_gb or tasks[i + 1].inputs_gb or 0.0) for i in range(len(tasks) - 1)
    ]


def input_source(task: PlannableTask, position: int) -> Source | None:
    """Where a task's `inputs` live, when the URI names a cloud's bucket."""
    inputs = getattr(task, "inputs", None)
    if not inputs:
        return None
    uri, gigabytes = next(iter(inputs.items()))
    scheme, _, rest = str(uri).partition("://")
    cloud = BUCKET_CLOUDS.get(scheme.lower())
    if cloud is None and scheme.lower() == "https" and ".blob.core.windows.net" in rest.split("/")[0]:
        cloud = "azure"
    if cloud is None or not gigabytes:
        return None
    return Source(position, cloud, float(gigabytes))


def plan_pipeline(
    pipeline: PlannablePipeline,
    catalog: HasOfferings,
    *,
    enabled_clouds: Collection[str] | None = None,
    blocklist: Sequence[Block] = (),
    minimize: str = "cost",
    edges: Sequence[Edge] | None = None,
    max_candidates: int | None = DEFAULT_MAX_CANDIDATES,
    prices: TeamPrices | None = None,
    data: Sequence[Source] = (),
) -> Plan:
    """The joint plan of a pipeline; `edges` overrides the DAG implied by `pipeline.execution`; `prices`:
    the team's contracts (shared.optimizer.contract_pricing), else every place at list price. `data`: the
    buckets tasks read (and write back to), where they live and how much (shared.storage.gravity)."""
    check_objective(minimize)
    tasks = list(pipeline.tasks)
    dag = list(pipeline_edges(pipeline) if edges is None else edges)
    list_catalog = catalog
    if prices is not None:
        catalog = team_catalog(catalog, prices.contracts)
    failovers = [
        _failover(
            i, _label(i, t, len(tasks)), t, catalog, enabled_clouds, blocklist, minimize, max_candidates
        )
        for i, t in enumerate(tasks)
    ]
    reserved: list[list[Candidate]] = [[] for _ in tasks]
    if prices is not None:
        reserved = [
            reserved_candidates(t.resource_choice(), t.num_nodes, list_catalog, prices,
                                enabled_clouds=enabled_clouds, blocklist=blocklist)
            for t in tasks
        ]  # fmt: skip
        failovers = [
            _reserved_first(with_list_prices(f, prices.contracts), r, t.resource_choice().ordered, minimize)
            for t, f, r in zip(tasks, failovers, reserved, strict=True)
        ]
    has_parent = {e.target for e in dag}
    sources = [
        s for i, t in enumerate(tasks) if i not in has_parent and (s := input_source(t, i)) is not None
    ]
    sources += [s for s in data if s.gigabytes > 0 or s.write_gigabytes > 0]
    if sources or any(e.gigabytes > 0 for e in dag) or (minimize == "time" and len(tasks) > 1):
        index = index_for(catalog)
        regional = {s.target for s in sources if s.region is not None}
        options = [
            r + dominant_options(t, index, enabled_clouds, blocklist, minimize, per_region=i in regional)
            for i, (t, r) in enumerate(zip(tasks, reserved, strict=True))
        ]
        chosen = [options[i][k] for i, k in enumerate(solve(options, dag, sources, minimize))]
        alone = [f[0] for f in failovers]
        failovers = [
            f if t.resource_choice().ordered else _in_context(i, f, chosen, dag, sources, minimize)
            for i, (t, f) in enumerate(zip(tasks, failovers, strict=True))
        ]
    else:
        chosen = alone = [f[0] for f in failovers]
    plans = [
        TaskPlan(task_name=t.name, num_nodes=t.num_nodes, candidates=[c, *(x for x in f if _at(x) != _at(c))])
        for t, c, f in zip(tasks, chosen, failovers, strict=True)
    ]
    egress = total_egress_cost(chosen, dag, sources)
    total = sum(c.estimated_cost for c in chosen) + egress
    notes = gravity_notes(chosen, alone, failovers, sources) if data else []
    if prices is not None:
        for i, (t, p) in enumerate(zip(tasks, plans, strict=True)):
            p.candidates = with_list_prices(p.candidates, prices.contracts)
            notes += contract_notes(_label(i, t, len(tasks)), p.candidates, prices)
    return Plan(objective=minimize, tasks=plans, egress_cost=egress, total_cost=total, notes=notes)


def _at(c: Candidate) -> tuple[str, str, str | None, str, bool, str | None]:
    return (c.cloud, c.region, c.zone, c.instance_type, c.use_spot, c.reservation)


def _reserved_first(
    failover: list[Candidate], reserved: list[Candidate], ordered: bool, minimize: str
) -> list[Candidate]:
    """Free reserved places ahead of what they cost nothing against; the list-price twins stay behind them
    as the failover when a reservation turns out full. An `ordered` task keeps the user's order: a reserved
    place goes just before its twin. Under the time objective, hours decide first."""
    if not reserved:
        return failover
    if ordered:
        merged = list(failover)
        for r in reversed(reserved):
            twins = (i for i, c in enumerate(merged) if _at(c)[:5] == _at(r)[:5] and c.reservation is None)
            twin = next(twins, len(merged))
            merged.insert(twin, r)
        return merged
    if minimize == "time":
        return sorted([*reserved, *failover], key=lambda c: c.estimated_hours)
    return [*reserved, *failover]


def _in_context(
    task: int,
    failover: list[Candidate],
    chosen: list[Candidate],
    dag: Sequence[Edge],
    sources: Sequence[Source],
    minimize: str,
) -> list[Candidate]:
    """A task's failover list re-ranked with the data it must move given where its neighbours run."""

    def moved(c: Candidate) -> float:
        cost = arrival_cost(task, c, sources)
        for e in dag:
            if e.target == task:
                cost += egress_cost(chosen[e.source].cloud, c.cloud, e.gigabytes)
            elif e.source == task:
                cost += egress_cost(c.cloud, chosen[e.target].cloud, e.gigabytes)
        return cost

    if minimize == "cost":
        return sorted(failover, key=lambda c: c.estimated_cost + moved(c))
    return sorted(failover, key=lambda c: (c.estimated_hours, c.estimated_cost + moved(c)))


def _label(position: int, task: PlannableTask, count: int) -> str | None:
    if task.name:
        return f"task {task.name!r}"
    return f"task #{position + 1}" if count > 1 else None


def _failover(
    position: int,
    label: str | None,
    task: PlannableTask,
    catalog: HasOfferings,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
    max_candidates: int | None,
) -> list[Candidate]:
    try:
        return plan_task(
            task.resource_choice(),
            task.num_nodes,
            catalog,
            enabled_clouds=enabled_clouds,
            blocklist=blocklist,
            minimize=minimize,
            max_candidates=max_candidates,
        )
    except NoOfferingError as error:
        error.task_index = position  # type: ignore[attr-defined]  # for shared.optimizer.errors
        if label is None:
            raise
        labelled = NoOfferingError(
            f"{label}: {error.message}", file=error.file, line=error.line, field=error.field, hint=error.hint
        )
        labelled.__dict__.update({k: v for k, v in vars(error).items() if k in ("paths", "task_index")})
        raise labelled from None


def dominant_options(
    task: PlannableTask,
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
    *,
    per_region: bool = False,
) -> list[Candidate]:
    """Per cloud (per cloud and region, `per_region`, when the task reads a bucket whose region prices its
    egress), the candidates no other candidate of that place beats on both hours and cost.

    Under the cost objective that is the cheapest per place. Order: the objective's order.
    """
    heads = cheapest_per_shape_and_cloud(
        task.resource_choice(),
        index,
        enabled_clouds,
        blocklist,
        minimize,
        task.num_nodes,
        per_region=per_region,
    )
    cheapest: dict[tuple[str, str], float] = {}
    kept: list[Candidate] = []
    for entry, spot, factor in heads:
        candidate = candidate_from(entry, spot, task.num_nodes, factor)
        place = (candidate.cloud, candidate.region if per_region else "")
        cost = entry[0] * factor
        best = cheapest.get(place)
        if best is not None and (minimize == "cost" or cost >= best):
            continue
        cheapest[place] = cost
        kept.append(candidate)
    return kept
