"""Deadline-aware spot policy: finish by the deadline for the least money.

Pure code (stdlib only, no I/O). The control plane builds a `DeadlineState` (now, deadline, work left,
restart overhead, the current cluster), the plan's places with their prices (`PlaceOption`) and what it
has seen of spot capacity per place (`SpotHistory`), and calls

    decide(job, places, history, config=DEFAULT_CONFIG) -> UseSpot | UseOnDemand | Wait

then acts on the answer and asks again at the answer's `next_check` or at the next event (launch result,
preemption, capacity error), whichever comes first. `decide_greedy` and `decide_uniform_progress` are the
baselines of "Can't Be Late" (NSDI '24), and `decide_spot_only` is SkyPilot's deadline-blind managed spot
recovery, all with the same signature; `replay` runs any of them over
availability traces and `optimal_cost` is the least any schedule could pay on the same trace;
`estimate_cost` replays `decide` over synthetic availability for `skyless plan --deadline`.
"""

from shared.spot_policy.baselines import decide_greedy, decide_spot_only, decide_uniform_progress
from shared.spot_policy.deadline_policy import DEFAULT_CONFIG, PolicyConfig, decide
from shared.spot_policy.estimate import Estimate, estimate_cost
from shared.spot_policy.job_state import (
    DeadlineState,
    Decision,
    Market,
    Placement,
    PlaceOption,
    UseOnDemand,
    UseSpot,
    Wait,
    next_check,
)
from shared.spot_policy.optimal import optimal_cost
from shared.spot_policy.replay import AvailabilityTrace, Policy, PolicyError, ReplayResult, replay
from shared.spot_policy.spot_history import SpotHistory

__all__ = [
    "DEFAULT_CONFIG",
    "AvailabilityTrace",
    "DeadlineState",
    "Decision",
    "Estimate",
    "Market",
    "PlaceOption",
    "Placement",
    "Policy",
    "PolicyConfig",
    "PolicyError",
    "ReplayResult",
    "SpotHistory",
    "UseOnDemand",
    "UseSpot",
    "Wait",
    "decide",
    "decide_greedy",
    "decide_spot_only",
    "decide_uniform_progress",
    "estimate_cost",
    "next_check",
    "optimal_cost",
    "replay",
]
