"""The least a job can pay on a trace when the whole future is known: the yardstick of the benchmark.

Same model as `shared.spot_policy.replay` (decisions on tick boundaries, a restart overhead per launch,
spot runs while its place has capacity, on-demand always has it). A dynamic program over the ticks:
at each tick boundary every mode (idle, on-demand, spot at each place) holds the labels (progress,
cost) of the schedules that reach it. A launch subtracts the restart overhead from the progress (exact
here, since a schedule that knows the future never launches a run shorter than the overhead: idling is
cheaper). A label A is dropped when a label B of the same mode has at least its progress and
cost_B - cost_A <= cheapest_price * (progress_B - progress_A): B can follow A's best continuation and stop
earlier, saving at least that much. A label whose cost already reaches the best finish found so far (or
a known upper bound) is dropped too.

Cost: ticks x modes x labels. With several places spot nearly always has capacity somewhere and the
fronts stay small (about 0.1 s for a 60 h window of the 9-zone trace); in one place every trade-off of
waiting against on-demand survives and a window costs 0.1-1 s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from shared.spot_policy.job_state import PlaceOption
from shared.spot_policy.replay import AvailabilityTrace

Label = tuple[float, float]  # (progress seconds, dollars)


def optimal_cost(
    traces: Sequence[AvailabilityTrace],
    places: Sequence[PlaceOption],
    *,
    start_tick: int,
    total_work: float,
    deadline_after: float,
    restart_overhead: float,
    upper_bound: float = math.inf,
) -> float:
    """The least cost (dollars) of finishing `total_work` within `deadline_after` seconds from
    `start_tick`; math.inf if even on-demand cannot.

    `upper_bound` is the cost of a schedule known to be feasible in the same model (e.g. a replay that met
    its deadline): it only prunes the search, and is the answer when nothing is cheaper."""
    gap = traces[0].gap
    by_place = {t.place: t for t in traces}
    spot = [(p.place, p.spot_price / 3600) for p in places if p.spot_price is not None]
    od_prices = [p.on_demand_price for p in places if p.on_demand_price is not None]
    od = min(od_prices) / 3600 if od_prices else None
    cheapest = min([price for _, price in spot] + ([od] if od is not None else []))
    work, overhead = total_work, restart_overhead
    ticks = math.ceil(deadline_after / gap - 1e-9)
    idle: list[Label] = [(0.0, 0.0)]
    on_demand: list[Label] = []
    on_spot: list[list[Label]] = [[] for _ in spot]
    best = upper_bound * (1 + 1e-9) + 1e-9
    for k in range(ticks):
        remaining = deadline_after - k * gap
        length = min(gap, remaining)
        idle = _front([*idle, *on_demand, *(label for front in on_spot for label in front)], cheapest)
        idle = [lb for lb in idle if work - lb[0] + overhead <= remaining + 1e-9 and lb[1] < best]
        launched = [(p - overhead, c) for p, c in idle]
        if od is not None:
            on_demand, best = _advance(_front(on_demand + launched, cheapest), od, length, gap, work, best)
        for i, (place, price) in enumerate(spot):
            if by_place[place].up_at(start_tick + k):
                on_spot[i], best = _advance(
                    _front(on_spot[i] + launched, cheapest), price, length, gap, work, best
                )
            else:
                on_spot[i] = []
        left = remaining - gap
        on_demand = [lb for lb in on_demand if work - lb[0] <= left + 1e-9 and lb[1] < best]
        on_spot = [[lb for lb in front if work - lb[0] <= left + 1e-9 and lb[1] < best] for front in on_spot]
    return min(best, upper_bound)


def _advance(
    front: list[Label], price: float, length: float, gap: float, work: float, best: float
) -> tuple[list[Label], float]:
    """Run every label of a busy mode through one tick: those that finish in it set `best`."""
    moved = []
    for p, c in front:
        if work - p <= length + 1e-9:
            best = min(best, c + price * max(0.0, work - p))
        elif length >= gap:
            moved.append((p + gap, c + price * gap))
    return moved, best


def _front(labels: list[Label], cheapest: float) -> list[Label]:
    """Labels no other label dominates (see the module's docstring), by decreasing progress."""
    labels.sort(key=lambda label: (-label[0], label[1]))
    kept: list[Label] = []
    lowest = math.inf
    for p, c in labels:
        adjusted = c - cheapest * p
        if adjusted < lowest - 1e-12:
            kept.append((p, c))
            lowest = adjusted
    return kept
