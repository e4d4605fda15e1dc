"""Plan a pipeline jointly: where each task runs, counting the egress of data between tasks.

- A single task, or tasks with no data edges between them (a parallel job group): each task takes
  the head of its own failover list.
- A chain (`execution: serial`): dynamic programming over (cloud, region) states, as SkyPilot's
  `_optimize_by_dp` does.
- Any other DAG (edges given explicitly): an exact branch-and-bound search over assignments.

Egress on an edge u -> v moves `u.outputs_gb` (or, when u declares none, `v.inputs_gb`) from u's
cloud to v's at `EGRESS_PER_GB[u's cloud]`; nothing is charged within one cloud, whatever the regions
(SkyPilot's model). Under the time objective an edge between clouds also takes
`GB * 8 / EGRESS_GBPS` seconds.

Values compared: cost objective, total estimated cost (tasks + egress); time objective, (finish time
of the last task, total cost). Since egress depends on clouds only, a task's options are reduced,
exactly, to those no other option of the same cloud beats on both hours and cost.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.errors import NoOfferingError
from shared.offering import Offering
from shared.offering_index import OfferingIndex, hardware_keys, index_for
from shared.plan import Block, Candidate, Plan, TaskPlan
from shared.resources import ResourceChoice
from shared.task_optimizer import (
    DEFAULT_MAX_CANDIDATES,
    candidate_from,
    check_objective,
    plan_task,
    ranked_offerings,
    requests_of,
)

# $/GB to move data out of a cloud to the internet / another cloud (list prices, first tier).
EGRESS_PER_GB: dict[str, float] = {
    "aws": 0.09,
    "gcp": 0.12,
    "azure": 0.0875,
    "lambda": 0.0,
    "runpod": 0.0,
    "vast": 0.0,
    "local": 0.0,
}
DEFAULT_EGRESS_PER_GB = 0.09  # a cloud missing from the table
EGRESS_GBPS = 10.0  # SkyPilot's assumption for egress time

Value = tuple[float, ...]


class PlannableTask(Protocol):
    name: str | None
    num_nodes: int
    inputs_gb: float
    outputs_gb: float

    def resource_choice(self) -> ResourceChoice: ...


class PlannablePipeline(Protocol):
    execution: str
    tasks: Sequence[PlannableTask]


class HasOfferings(Protocol):
    offerings: tuple[Offering, ...]


@dataclass(frozen=True, slots=True)
class Edge:
    source: int
    target: int
    gigabytes: float


def egress_cost(source_cloud: str, target_cloud: str, gigabytes: float) -> float:
    if source_cloud == target_cloud or gigabytes <= 0:
        return 0.0
    return gigabytes * EGRESS_PER_GB.get(source_cloud, DEFAULT_EGRESS_PER_GB)


def egress_hours(source_cloud: str, target_cloud: str, gigabytes: float) -> float:
    if source_cloud == target_cloud or gigabytes <= 0:
        return 0.0
    return gigabytes * 8 / EGRESS_GBPS / 3600


def pipeline_edges(pipeline: PlannablePipeline) -> list[Edge]:
    """Serial pipelines are chains; parallel job groups have no data edges."""
    if pipeline.execution == "parallel":
        return []
    tasks = pipeline.tasks
    return [
        Edge(i, i + 1, tasks[i].outputs_gb or tasks[i + 1].inputs_gb or 0.0) for i in range(len(tasks) - 1)
    ]


def plan_pipeline(
    pipeline: PlannablePipeline,
    catalog: HasOfferings,
    *,
    enabled_clouds: Collection[str] | None = None,
    blocklist: Sequence[Block] = (),
    minimize: str = "cost",
    edges: Sequence[Edge] | None = None,
    max_candidates: int | None = DEFAULT_MAX_CANDIDATES,
) -> Plan:
    """The joint plan of a pipeline; `edges` overrides the DAG implied by `pipeline.execution`."""
    check_objective(minimize)
    tasks = list(pipeline.tasks)
    dag = list(pipeline_edges(pipeline) if edges is None else edges)
    failovers = [
        _failover(_label(i, t, len(tasks)), t, catalog, enabled_clouds, blocklist, minimize, max_candidates)
        for i, t in enumerate(tasks)
    ]
    if any(e.gigabytes > 0 for e in dag):
        index = index_for(catalog)
        options = [dominant_options(t, index, enabled_clouds, blocklist, minimize) for t in tasks]
        chosen_at = solve(options, dag, minimize)
        chosen = [options[i][k] for i, k in enumerate(chosen_at)]
    else:
        chosen = [f[0] for f in failovers]
    plans = [
        TaskPlan(task_name=t.name, num_nodes=t.num_nodes, candidates=[c, *(x for x in f if x != c)])
        for t, c, f in zip(tasks, chosen, failovers, strict=True)
    ]
    egress = sum(egress_cost(chosen[e.source].cloud, chosen[e.target].cloud, e.gigabytes) for e in dag)
    total = sum(c.estimated_cost for c in chosen) + egress
    return Plan(objective=minimize, tasks=plans, egress_cost=egress, total_cost=total)


def _label(position: int, task: PlannableTask, count: int) -> str | None:
    if task.name:
        return f"task {task.name!r}"
    return f"task #{position + 1}" if count > 1 else None


def _failover(
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
        if label is None:
            raise
        raise NoOfferingError(
            f"{label}: {error.message}", file=error.file, line=error.line, field=error.field, hint=error.hint
        ) from None


def dominant_options(
    task: PlannableTask,
    index: OfferingIndex,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    minimize: str,
) -> list[Candidate]:
    """Per cloud, the candidates no other candidate of that cloud beats on both hours and cost.

    Under the cost objective that is the cheapest per cloud. Order: the task's failover order.
    """
    choice = task.resource_choice()
    requests = requests_of(choice)
    ranked = ranked_offerings(requests, choice.ordered, index, enabled_clouds, blocklist, minimize)
    clouds = {
        cloud
        for r in requests
        for key in hardware_keys(r, index)
        for cloud in ((r.cloud,) if r.cloud else index.clouds)
        if (enabled_clouds is None or cloud in enabled_clouds) and index.run(key, r.use_spot, cloud)
    }
    cheapest: dict[str, float] = {}
    kept: list[Candidate] = []
    for entry, spot, factor in ranked:
        if minimize == "cost" and len(cheapest) == len(clouds):
            break
        cloud, cost = entry[1], entry[0] * factor
        best = cheapest.get(cloud)
        if best is not None and (minimize == "cost" or cost >= best):
            continue
        cheapest[cloud] = cost
        kept.append(candidate_from(entry, spot, task.num_nodes, factor))
    return kept


def solve(options: Sequence[Sequence[Candidate]], edges: Sequence[Edge], minimize: str) -> list[int]:
    """The index of the chosen option of every task: DP for a chain, branch and bound otherwise."""
    n = len(options)
    if all(e.gigabytes <= 0 for e in edges):
        return [0] * n
    if _is_chain(n, edges):
        return _solve_chain(options, edges, minimize)
    return _solve_dag(options, edges, minimize)


def assignment_value(chosen: Sequence[Candidate], edges: Sequence[Edge], minimize: str) -> Value:
    """The objective value of one full assignment (what the solvers minimise; tests brute-force it)."""
    cost = sum(c.estimated_cost for c in chosen)
    cost += sum(egress_cost(chosen[e.source].cloud, chosen[e.target].cloud, e.gigabytes) for e in edges)
    if minimize == "cost":
        return (cost,)
    finish = _finish_times(chosen, edges)
    return (max(finish), cost)


def _finish_times(chosen: Sequence[Candidate], edges: Sequence[Edge]) -> list[float]:
    parents: dict[int, list[Edge]] = {}
    for e in edges:
        parents.setdefault(e.target, []).append(e)
    finish: list[float | None] = [None] * len(chosen)

    def done(v: int) -> float:
        value = finish[v]
        if value is None:
            start = max(
                (
                    done(e.source) + egress_hours(chosen[e.source].cloud, chosen[v].cloud, e.gigabytes)
                    for e in parents.get(v, ())
                ),
                default=0.0,
            )
            value = finish[v] = start + chosen[v].estimated_hours
        return value

    return [done(v) for v in range(len(chosen))]


def _is_chain(n: int, edges: Sequence[Edge]) -> bool:
    return sorted((e.source, e.target) for e in edges) == [(i, i + 1) for i in range(n - 1)]


def _exec_value(c: Candidate, minimize: str) -> Value:
    return (c.estimated_cost,) if minimize == "cost" else (c.estimated_hours, c.estimated_cost)


def _edge_value(a: Candidate, b: Candidate, gigabytes: float, minimize: str) -> Value:
    cost = egress_cost(a.cloud, b.cloud, gigabytes)
    return (cost,) if minimize == "cost" else (egress_hours(a.cloud, b.cloud, gigabytes), cost)


def _add(a: Value, b: Value) -> Value:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _solve_chain(options: Sequence[Sequence[Candidate]], edges: Sequence[Edge], minimize: str) -> list[int]:
    gigabytes = {e.source: e.gigabytes for e in edges}
    best: list[Value] = [_exec_value(c, minimize) for c in options[0]]
    back: list[list[int]] = []
    for i in range(1, len(options)):
        here: list[Value] = []
        pointers: list[int] = []
        for c in options[i]:
            arg, value = 0, None
            for k, p in enumerate(options[i - 1]):
                through = _add(best[k], _edge_value(p, c, gigabytes[i - 1], minimize))
                if value is None or through < value:
                    arg, value = k, through
            assert value is not None
            here.append(_add(value, _exec_value(c, minimize)))
            pointers.append(arg)
        best, back = here, [*back, pointers]
    last = min(range(len(best)), key=best.__getitem__)
    chosen = [last]
    for pointers in reversed(back):
        chosen.append(pointers[chosen[-1]])
    return chosen[::-1]


def _solve_dag(options: Sequence[Sequence[Candidate]], edges: Sequence[Edge], minimize: str) -> list[int]:
    """Exact: depth-first over tasks in topological order, pruned by a lower bound on the value."""
    n = len(options)
    order = _topological_order(n, edges)
    incoming: dict[int, list[Edge]] = {v: [] for v in range(n)}
    for e in edges:
        incoming[e.target].append(e)
    cheapest_rest = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        cheapest_rest[i] = cheapest_rest[i + 1] + min(c.estimated_cost for c in options[order[i]])
    picked: list[int] = [0] * n
    finish = [0.0] * n
    best: list[object] = [None, None]  # value, assignment

    def visit(depth: int, cost: float, makespan: float) -> None:
        if depth == n:
            value: Value = (cost,) if minimize == "cost" else (makespan, cost)
            if best[0] is None or value < best[0]:  # type: ignore[operator]
                best[0], best[1] = value, list(picked)
            return
        bound: Value = (cost + cheapest_rest[depth],)
        if minimize == "time":
            bound = (makespan, cost + cheapest_rest[depth])
        if best[0] is not None and bound >= best[0]:  # type: ignore[operator]
            return
        v = order[depth]
        for k, c in enumerate(options[v]):
            start, moved = 0.0, 0.0
            for e in incoming[v]:
                source = options[e.source][picked[e.source]]
                moved += egress_cost(source.cloud, c.cloud, e.gigabytes)
                start = max(start, finish[e.source] + egress_hours(source.cloud, c.cloud, e.gigabytes))
            picked[v], finish[v] = k, start + c.estimated_hours
            visit(depth + 1, cost + c.estimated_cost + moved, max(makespan, finish[v]))

    visit(0, 0.0, 0.0)
    assert best[1] is not None
    return best[1]  # type: ignore[return-value]


def _topological_order(n: int, edges: Sequence[Edge]) -> list[int]:
    indegree = [0] * n
    children: dict[int, list[int]] = {}
    for e in edges:
        indegree[e.target] += 1
        children.setdefault(e.source, []).append(e.target)
    ready = [v for v in range(n) if indegree[v] == 0]
    order: list[int] = []
    while ready:
        v = ready.pop(0)
        order.append(v)
        for w in children.get(v, ()):
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    if len(order) != n:
        raise ValueError("the task graph has a cycle")
    return order
