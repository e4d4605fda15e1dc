"""The peers `benchmarks/spot_policy.py --control-plane --policy NAME` runs in place of skyless's `decide`,
through the same handlers (the deadline launch and checks call the peer's answer instead of skyless's):

- `uniform-progress`: "Can't Be Late"'s Uniform Progress over every zone of the plan (multi-region: the
  first zone of the plan with capacity), `shared.spot_policy.decide_uniform_progress`;
- `greedy`: spot wherever there is capacity, on-demand to the end once the slack covers one restart;
- `expected-cost`: the experiment of `spot_cost_policy.py` (a dynamic program over expected costs);
- `eager-next-region`: SkyPilot's managed-job recovery for a job with no deadline
  (`sky/jobs/recovery_strategy.py`, `EagerFailoverStrategyExecutor`): spot only; after a preemption, up to
  3 failover sweeps over every place except the preempted region, then sweeps over every place, forever;
  between sweeps `common_utils.Backoff(60)`: 60 s, x1.6 each time, at most 300 s (no jitter here), the
  backoff starting over for each `_launch` call as SkyPilot's does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from spot_cost_policy import decide_cost

from shared.spot_policy import (
    DeadlineState,
    Decision,
    Market,
    PlaceOption,
    SpotHistory,
    UseSpot,
    Wait,
    decide_greedy,
    decide_uniform_progress,
)

INITIAL_GAP = 60.0  # StrategyExecutor.RETRY_INIT_GAP_SECONDS
MULTIPLIER = 1.6  # common_utils.Backoff
MAX_GAP = 5 * INITIAL_GAP  # Backoff(max_backoff_factor=5)
BLOCKED_SWEEPS = 3  # EagerFailoverStrategyExecutor.recover: step 2 is _launch(max_retry=3)


class EagerNextRegion:
    """SkyPilot's EAGER_NEXT_REGION as a policy with memory (one instance per job): the place order of the
    plan, the region of the last spot cluster blocked for the first sweeps of a recovery."""

    def __init__(self) -> None:
        self.region: str | None = None  # of the spot cluster last seen running
        self.recovering = False
        self.sweep = 0  # sweeps done in this _launch call
        self.sweep_began = 0.0
        self.next_gap = INITIAL_GAP

    def __call__(
        self,
        job: DeadlineState,
        places: Sequence[PlaceOption],
        history: Mapping[str, SpotHistory] | None = None,
        config: Any = None,
    ) -> Decision:
        history = history or {}
        spot = [p for p in places if p.spot_price is not None]
        current = job.current
        if current is not None and current.market is Market.SPOT:
            self.region = next((p.group for p in spot if p.place == current.place), None)
            self.recovering, self.sweep, self.next_gap = False, 0, INITIAL_GAP
            self.sweep_began = job.now
            return UseSpot(current.place, "eager next region: spot is running")
        if not self.recovering:  # a launch (first, or after a preemption): a new sweep starts now
            self.recovering, self.sweep, self.next_gap, self.sweep_began = True, 0, INITIAL_GAP, job.now
        blocked = self.region if self.region is not None and self.sweep < BLOCKED_SWEEPS else None
        for option in spot:
            if option.group == blocked:
                continue
            seen = history.get(option.place, SpotHistory()).last_unavailable
            if seen is None or seen < self.sweep_began:  # not refused in this sweep yet
                return UseSpot(option.place, "eager next region: the next place of the sweep")
        gap = self.next_gap
        self.sweep += 1
        if blocked is not None and self.sweep == BLOCKED_SWEEPS:
            self.next_gap = INITIAL_GAP  # step 3 is a new _launch: its own Backoff
        else:
            self.next_gap = min(gap * MULTIPLIER, MAX_GAP)
        self.sweep_began = job.now + gap
        return Wait(job.now + gap, f"eager next region: no capacity in the sweep; retrying in {gap:.0f} s")


PolicyFactory = Callable[[], Callable[..., Decision]]
PEERS: dict[str, PolicyFactory] = {
    "uniform-progress": lambda: decide_uniform_progress,
    "greedy": lambda: decide_greedy,
    "expected-cost": lambda: decide_cost,
    "eager-next-region": EagerNextRegion,
}


@contextmanager
def deciding_with(name: str) -> Iterator[None]:
    """The control plane's deadline launch and checks answer with the peer `name` for the duration."""
    from shared.jobs import deadline_launch

    if name == "skyless":
        yield
        return
    policy = PEERS[name]()
    saved = deadline_launch.decide
    deadline_launch.decide = policy  # type: ignore[assignment]
    try:
        yield
    finally:
        deadline_launch.decide = saved
