"""Cost rollups: what ended attempts cost, per UTC day, owner and cloud, kept with no TTL so cost reports stay
exact after the job detail expires and read a few items per day whatever the number of jobs.

A rollup item is one item of the events table (notifications ignore partitions not named `job-...`), in two
copies: `costs#all#<YYYY-MM>` / `<day>#<owner>#<cloud>` for every user's report and
`costs#user#<owner>#<YYYY-MM>` / `<day>#<cloud>` for one user's; a report over N days reads each copy's
month partitions with one range query per month. Its numbers are added with DynamoDB's ADD, in the same
transaction as the cluster's conditional UP -> TERMINATED write: an attempt that ends twice (a duplicate,
a late message, the reconcile sweep after a crash) is counted once, and a crash between two calls leaves the
cluster UP for the next try. An attempt longer than `DAYS_PER_WRITE` days writes its earlier whole days first,
each group guarded by a marker item (`costs#done#<cluster id>` / `<first day>`) put in its own transaction;
the last group's marker is the cluster record's `rolled_up` flag, set in its end write (no item of its own),
so the backfill of a stack made before rollups (shared/jobs/rollup_backfill.py) knows which attempts are
counted. (Stacks ended attempts with an `end` marker item before the flag; the backfill still honours those.)

An attempt counts on the day it started (`attempts`), and a job on the day and cloud its first cluster
started (`jobs`); money and hours are split between days in proportion to the hours on each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.store.models import ClusterModel

ROLLUP_PREFIX = "costs#"
DONE_PREFIX = "costs#done#"
END_MARK = "end"  # the marker item of an attempt's last group, as written before the cluster's `rolled_up`
PLACES = 6  # counters are kept to a micro-dollar (and 3.6 ms of an hour)
DAYS_PER_WRITE = 45  # two items a day, plus the cluster (or a marker): within a transaction's 100 items
COUNTERS = ("cost", "on_demand_cost", "spot_cost", "hours", "attempts", "jobs")


@dataclass(frozen=True)
class AttemptFacts:
    """What the store cannot see in a cluster record: whose it is, the on-demand $/h of one node in the same
    place (None: unknown, the attempt claims no savings), and whether it is its job's first cluster."""

    owner: str
    on_demand_hourly: float | None
    first_of_job: bool


@dataclass(frozen=True)
class CostPiece:
    """One day's share of one or more attempts of one owner on one cloud."""

    day: str
    owner: str
    cloud: str
    cost: float = 0.0
    on_demand_cost: float = 0.0
    spot_cost: float = 0.0
    hours: float = 0.0
    attempts: int = 0
    jobs: int = 0

    def counters(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COUNTERS}


def day_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def attempt_pieces(
    *,
    cloud: str,
    use_spot: bool,
    hourly_price: float | None,
    num_nodes: int,
    launched_at: float,
    ended_at: float,
    facts: AttemptFacts,
) -> list[CostPiece]:
    """The attempt's cost from launch to `ended_at`, one piece per UTC day it ran, oldest first."""
    price = float(hourly_price or 0.0)
    on_demand = price if not use_spot else facts.on_demand_hourly
    start, end = float(launched_at), max(float(ended_at), float(launched_at))
    bounds = [start]
    while bounds[-1] < end:
        midnight = datetime.fromtimestamp(bounds[-1], UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        bounds.append(min(end, (midnight + timedelta(days=1)).timestamp()))
    if len(bounds) == 1:
        bounds.append(end)
    pieces = []
    for n, (a, b) in enumerate(pairwise(bounds)):
        hours = (b - a) / 3600
        cost = price * num_nodes * hours
        pieces.append(
            CostPiece(
                day=day_of(a),
                owner=facts.owner,
                cloud=cloud,
                cost=cost,
                on_demand_cost=cost if on_demand is None else on_demand * num_nodes * hours,
                spot_cost=cost if use_spot else 0.0,
                hours=hours,
                attempts=1 if n == 0 else 0,
                jobs=1 if n == 0 and facts.first_of_job else 0,
            )
        )
    return pieces


def cluster_pieces(cluster: ClusterModel, facts: AttemptFacts, ended_at: float) -> list[CostPiece]:
    return attempt_pieces(
        cloud=cluster.cloud,
        use_spot=bool(cluster.use_spot),
        hourly_price=None if cluster.hourly_price is None else float(cluster.hourly_price),
        num_nodes=int(cluster.num_nodes),
        launched_at=float(cluster.launched_at),
        ended_at=ended_at,
        facts=facts,
    )


def rollup_keys(piece: CostPiece) -> list[tuple[str, str]]:
    """(partition, sort key) of the piece's two copies: every user's, and its owner's."""
    month = piece.day[:7]
    return [
        (f"{ROLLUP_PREFIX}all#{month}", f"{piece.day}#{piece.owner}#{piece.cloud}"),
        (f"{ROLLUP_PREFIX}user#{piece.owner}#{month}", f"{piece.day}#{piece.cloud}"),
    ]


def write_groups(pieces: list[CostPiece]) -> tuple[list[list[CostPiece]], list[CostPiece]]:
    """(earlier groups of whole days, each written under its own marker; the group written with the cluster).
    The groups are counted from the attempt's first day, so a retry computes the same earlier groups."""
    groups = [pieces[i : i + DAYS_PER_WRITE] for i in range(0, len(pieces), DAYS_PER_WRITE)] or [[]]
    return groups[:-1], groups[-1]


def month_ranges(first_day: str, last_day: str) -> list[tuple[str, str, str]]:
    """(YYYY-MM, first day, last day) of each month the days [first_day, last_day] touch, oldest first."""
    ranges = []
    day = datetime.strptime(first_day, "%Y-%m-%d").replace(tzinfo=UTC)
    last = datetime.strptime(last_day, "%Y-%m-%d").replace(tzinfo=UTC)
    while day <= last:
        month_end = (day.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
        end = min(month_end, last)
        ranges.append((day.strftime("%Y-%m"), day.strftime("%Y-%m-%d"), end.strftime("%Y-%m-%d")))
        day = end + timedelta(days=1)
    return ranges


def rollup_partitions(first_day: str, last_day: str, owner: str | None) -> list[tuple[str, str, str]]:
    """(partition, lowest sort key, highest sort key) to query for the days, for `owner` or everyone."""
    scope = "all#" if owner is None else f"user#{owner}#"
    return [
        (f"{ROLLUP_PREFIX}{scope}{month}", a, b + "~") for month, a, b in month_ranges(first_day, last_day)
    ]


def piece_of_item(partition: str, sort_key: str, values: dict[str, float]) -> CostPiece:
    """The piece a stored rollup item holds (either copy)."""
    if partition.startswith(f"{ROLLUP_PREFIX}all#"):
        day, owner, cloud = sort_key.split("#", 2)
    else:
        owner = partition[len(f"{ROLLUP_PREFIX}user#") :].rsplit("#", 1)[0]
        day, cloud = sort_key.split("#", 1)
    return CostPiece(
        day=day,
        owner=owner,
        cloud=cloud,
        cost=float(values.get("cost", 0)),
        on_demand_cost=float(values.get("on_demand_cost", 0)),
        spot_cost=float(values.get("spot_cost", 0)),
        hours=float(values.get("hours", 0)),
        attempts=int(values.get("attempts", 0)),
        jobs=int(values.get("jobs", 0)),
    )


def in_days(pieces: Iterable[CostPiece], first_day: str, last_day: str) -> list[CostPiece]:
    return [p for p in pieces if first_day <= p.day <= last_day]
