"""Pick one option (a candidate place) per task of a DAG, counting the data moved between clouds.

The value of an assignment:
- cost objective: `(total cost,)`, the tasks' estimated costs plus egress;
- time objective: `(finish time of the last task, total cost)`, where a task starts once every
  parent has finished and its data has arrived (`GB * 8 / EGRESS_GBPS` seconds between clouds).

Egress on an edge u -> v costs `GB * EGRESS_PER_GB[source cloud]`, nothing within one cloud whatever the
regions (SkyPilot's model). A `Source` (data stored in a bucket: an `s3://` input, a mounted bucket) costs
what reading it from the candidate's place costs, and writing back to it, at the prices of
shared.optimizer.egress_prices: by cloud, and by region too when the bucket's region is known.

Solvers: no edges, each task alone (exact for both objectives); a chain whose sources feed only its
first task, dynamic programming; anything else, depth-first branch and bound (exact, exponential in
the worst case: meant for the small DAGs task files describe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.optimizer.egress_prices import DEFAULT_EGRESS_PER_GB, EGRESS_PER_GB, transfer_per_gb

EGRESS_GBPS = 10.0  # SkyPilot's assumption for egress time

Value = tuple[float, ...]


class Placed(Protocol):
    @property
    def cloud(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def estimated_cost(self) -> float: ...
    @property
    def estimated_hours(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Edge:
    """Task `target` reads `gigabytes` that task `source` wrote."""

    source: int
    target: int
    gigabytes: float


@dataclass(frozen=True, slots=True)
class Source:
    """Task `target` reads `gigabytes` stored in `cloud` (its `inputs`, or a bucket it mounts) and writes
    `write_gigabytes` back to it. `region` None: somewhere in `cloud` (only leaving the cloud costs)."""

    target: int
    cloud: str
    gigabytes: float
    region: str | None = None
    write_gigabytes: float = 0.0
    label: str = ""  # how the plan names it: "s3://data (aws us-east-1)"

    def cost_from(self, c: Placed) -> float:
        """Egress of reading it from `c`'s place, and of writing back to it."""
        read = self.gigabytes * transfer_per_gb(self.cloud, self.region, c.cloud, self._near(c))
        write = self.write_gigabytes * transfer_per_gb(c.cloud, self._near(c), self.cloud, self.region)
        return read + write

    def _near(self, c: Placed) -> str | None:
        return c.region if self.region is not None else None

    def moves_to(self, c: Placed) -> bool:
        return c.cloud != self.cloud or (self.region is not None and c.region != self.region)


def egress_cost(source_cloud: str, target_cloud: str, gigabytes: float) -> float:
    if source_cloud == target_cloud or gigabytes <= 0:
        return 0.0
    return gigabytes * EGRESS_PER_GB.get(source_cloud, DEFAULT_EGRESS_PER_GB)


def egress_hours(source_cloud: str, target_cloud: str, gigabytes: float) -> float:
    if source_cloud == target_cloud or gigabytes <= 0:
        return 0.0
    return gigabytes * 8 / EGRESS_GBPS / 3600


def total_egress_cost(chosen: Sequence[Placed], edges: Sequence[Edge], sources: Sequence[Source]) -> float:
    moved = sum(egress_cost(chosen[e.source].cloud, chosen[e.target].cloud, e.gigabytes) for e in edges)
    return moved + sum(s.cost_from(chosen[s.target]) for s in sources)


def assignment_value(
    chosen: Sequence[Placed], edges: Sequence[Edge], sources: Sequence[Source], minimize: str
) -> Value:
    """The value of one full assignment: what the solvers minimise."""
    cost = sum(c.estimated_cost for c in chosen) + total_egress_cost(chosen, edges, sources)
    if minimize == "cost":
        return (cost,)
    finish: dict[int, float] = {}
    for v in topological_order(len(chosen), edges):
        start = _arrival_hours(v, chosen[v], sources)
        for e in edges:
            if e.target == v:
                moved = egress_hours(chosen[e.source].cloud, chosen[v].cloud, e.gigabytes)
                start = max(start, finish[e.source] + moved)
        finish[v] = start + chosen[v].estimated_hours
    return (max(finish.values(), default=0.0), cost)


def solve(
    options: Sequence[Sequence[Placed]], edges: Sequence[Edge], sources: Sequence[Source], minimize: str
) -> list[int]:
    """For every task, the index of its chosen option. Ties go to the earlier option."""
    n = len(options)
    if not edges:
        return _solve_independent(options, sources, minimize)
    chain = sorted((e.source, e.target) for e in edges) == [(i, i + 1) for i in range(n - 1)]
    if chain and all(s.target == 0 for s in sources):
        return _solve_chain(options, edges, sources, minimize)
    return _solve_dag(options, edges, sources, minimize)


def _rank(value: Value) -> Value:
    """A value as compared: hours (or dollars) equal to a nanounit are a tie, so the next part decides (two
    routes of the same hours summed in another order must not cost a dollar more)."""
    return tuple(round(x, 9) for x in value)


def arrival_cost(task: int, c: Placed, sources: Sequence[Source]) -> float:
    """What the data `task` reads from (and writes back to) its sources costs to move to and from `c`."""
    return sum(s.cost_from(c) for s in sources if s.target == task)


def _arrival_hours(task: int, c: Placed, sources: Sequence[Source]) -> float:
    return max(
        (s.gigabytes * 8 / EGRESS_GBPS / 3600 for s in sources if s.target == task and s.moves_to(c)),
        default=0.0,
    )


def _own_value(task: int, c: Placed, sources: Sequence[Source], minimize: str) -> Value:
    cost = c.estimated_cost + arrival_cost(task, c, sources)
    return (cost,) if minimize == "cost" else (_arrival_hours(task, c, sources) + c.estimated_hours, cost)


def _solve_independent(
    options: Sequence[Sequence[Placed]], sources: Sequence[Source], minimize: str
) -> list[int]:
    values = [[_own_value(i, c, sources, minimize) for c in opts] for i, opts in enumerate(options)]
    if minimize == "cost":
        return [min(range(len(v)), key=v.__getitem__) for v in values]
    # The makespan is the slowest task's best time; every other task takes its cheapest option within it.
    makespan = max(min(x[0] for x in v) for v in values)
    return [
        min((k for k in range(len(v)) if v[k][0] <= makespan + 1e-12), key=lambda k, v=v: (v[k][1], k))  # type: ignore[misc]
        for v in values
    ]


def _solve_chain(
    options: Sequence[Sequence[Placed]], edges: Sequence[Edge], sources: Sequence[Source], minimize: str
) -> list[int]:
    gigabytes = {e.source: e.gigabytes for e in edges}
    best: list[Value] = [_own_value(0, c, sources, minimize) for c in options[0]]
    back: list[list[int]] = []
    for i in range(1, len(options)):
        here: list[Value] = []
        pointers: list[int] = []
        for c in options[i]:
            arg, value = 0, None
            for k, p in enumerate(options[i - 1]):
                moved = egress_cost(p.cloud, c.cloud, gigabytes[i - 1])
                step = (
                    (moved,)
                    if minimize == "cost"
                    else (egress_hours(p.cloud, c.cloud, gigabytes[i - 1]), moved)
                )
                through = tuple(x + y for x, y in zip(best[k], step, strict=True))
                if value is None or _rank(through) < _rank(value):
                    arg, value = k, through
            assert value is not None
            own = _own_value(i, c, (), minimize)
            here.append(tuple(x + y for x, y in zip(value, own, strict=True)))
            pointers.append(arg)
        best = here
        back.append(pointers)
    chosen = [min(range(len(best)), key=lambda k: _rank(best[k]))]
    for pointers in reversed(back):
        chosen.append(pointers[chosen[-1]])
    return chosen[::-1]


def _solve_dag(
    options: Sequence[Sequence[Placed]], edges: Sequence[Edge], sources: Sequence[Source], minimize: str
) -> list[int]:
    """Depth-first over tasks in topological order, pruned by a lower bound on the final value."""
    n = len(options)
    order = topological_order(n, edges)
    incoming: dict[int, list[Edge]] = {v: [] for v in range(n)}
    for e in edges:
        incoming[e.target].append(e)
    cheapest_rest = [0.0] * (n + 1)
    for depth in range(n - 1, -1, -1):
        v = order[depth]
        cheapest_rest[depth] = cheapest_rest[depth + 1] + min(
            c.estimated_cost + arrival_cost(v, c, sources) for c in options[v]
        )
    picked = [0] * n
    finish = [0.0] * n
    best_value: list[Value] = []
    best_pick: list[int] = []

    def visit(depth: int, cost: float, makespan: float) -> None:
        rest = cost + cheapest_rest[depth]
        bound: Value = (rest,) if minimize == "cost" else (makespan, rest)
        if best_value and _rank(bound) >= _rank(best_value[0]):
            return
        if depth == n:
            best_value[:] = [bound]
            best_pick[:] = picked
            return
        v = order[depth]
        for k, c in enumerate(options[v]):
            start, moved = _arrival_hours(v, c, sources), arrival_cost(v, c, sources)
            for e in incoming[v]:
                parent = options[e.source][picked[e.source]]
                moved += egress_cost(parent.cloud, c.cloud, e.gigabytes)
                start = max(start, finish[e.source] + egress_hours(parent.cloud, c.cloud, e.gigabytes))
            picked[v], finish[v] = k, start + c.estimated_hours
            visit(depth + 1, cost + c.estimated_cost + moved, max(makespan, finish[v]))

    visit(0, 0.0, 0.0)
    return best_pick


def topological_order(n: int, edges: Sequence[Edge]) -> list[int]:
    """Tasks in an order where every edge points forward; ValueError on a cycle."""
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
