"""The records a spot decision is made from and the decision itself. Times are seconds (any epoch, the
same for every field); prices are dollars per hour of the job's whole cluster."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Market(StrEnum):
    SPOT = "spot"
    ON_DEMAND = "on_demand"


@dataclass(frozen=True)
class Placement:
    """The cluster the job has now: where, on which market, and when it was launched (its restart
    overhead runs from `started_at`)."""

    place: str
    market: Market
    started_at: float


@dataclass(frozen=True)
class DeadlineState:
    """Where a deadline job stands.

    `work_left` is the compute still to do, in seconds of the planned hardware, not counting the
    restart overhead of the current cluster (which `overhead_left` derives from `current.started_at`).
    `total_work` and `submitted_at` are the job's whole work and when its deadline clock started.
    """

    now: float
    deadline: float
    work_left: float
    restart_overhead: float
    total_work: float
    submitted_at: float
    current: Placement | None = None

    def __post_init__(self) -> None:
        if min(self.work_left, self.restart_overhead, self.total_work) < 0:
            raise ValueError("work_left, total_work and restart_overhead must not be negative")

    @property
    def overhead_left(self) -> float:
        """Seconds of the current cluster's restart overhead still to run before it makes progress."""
        if self.current is None:
            return 0.0
        return max(0.0, self.current.started_at + self.restart_overhead - self.now)

    @property
    def time_left(self) -> float:
        return self.deadline - self.now

    @property
    def slack(self) -> float:
        """Time to the deadline that the work (and the current cluster's overhead) does not need.
        Idling and restarts spend it; running does not."""
        return self.time_left - self.work_left - self.overhead_left


@dataclass(frozen=True)
class PlaceOption:
    """One place of the job's plan (a zone, region or cloud as the plan names it) and its prices there.
    A market whose price is None is not offered at that place. `region` groups places whose spot capacity
    tends to go away together (the zones of a region); None: the place is its own group."""

    place: str
    spot_price: float | None
    on_demand_price: float | None
    region: str | None = None

    @property
    def group(self) -> str:
        return self.region if self.region is not None else self.place


@dataclass(frozen=True)
class UseSpot:
    """Run (or keep running) on spot at `place`. Ask again at `check_at` if nothing happens first."""

    place: str
    reason: str
    check_at: float | None = None

    market = Market.SPOT


@dataclass(frozen=True)
class UseOnDemand:
    """Run (or keep running) on on-demand at `place`. Ask again at `check_at` if nothing happens first
    (None: only at the next event, e.g. the job's end)."""

    place: str
    reason: str
    check_at: float | None = None

    market = Market.ON_DEMAND


@dataclass(frozen=True)
class Wait:
    """Run nothing (tear down any cluster) and ask again at `until`."""

    until: float
    reason: str


Decision = UseSpot | UseOnDemand | Wait


def next_check(decision: Decision) -> float | None:
    """The moment the caller must ask again if no event comes first."""
    return decision.until if isinstance(decision, Wait) else decision.check_at
