"""What jobs cost: each attempt's cluster (spot or on-demand), what the same place would have cost on
on-demand, and the savings; grouped by cloud, user, job or day.

An attempt is one cluster record (`<job id>-<attempt>`); it costs its nodes at its plan price from launch
until the cloud stopped billing it (its termination, or now while it is up). That is what the cloud
bills, so it can be a few seconds more than the job's "cost so far", which stops when the job lets the
cluster go. The on-demand price of a spot attempt is the catalog's on-demand price for the same cloud,
region, zone and instance type; where the catalog has none, the attempt claims no savings
(`on_demand_known` is False).

`build_report` is pure (records in, report out); `cost_report` reads the records.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from shared.catalog.model import Catalog
from shared.config import Settings
from shared.jobs.costs import on_demand_price
from shared.store.cost_rollups import AttemptFacts, CostPiece, cluster_pieces, in_days
from shared.store.models import ClusterModel, JobModel

if TYPE_CHECKING:
    from shared.wiring import Wiring

GroupBy = Literal["cloud", "user", "job", "day"]
GROUPINGS: tuple[str, ...] = ("cloud", "user", "job", "day")
MAX_REPORT_DAYS = 366
MAX_LISTED_JOBS = 200  # the jobs a report lists one by one (its totals count every job)


@dataclass(frozen=True)
class JobRecord:
    """The facts of a job a report needs (a plain record: the report never touches a table row)."""

    job_id: str
    owner: str
    name: str | None
    state: str
    attempt: int
    created_at: float


@dataclass(frozen=True)
class ClusterRecord:
    cluster_id: str
    job_id: str
    attempt: int
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    use_spot: bool
    hourly_price: float | None  # one node, as planned
    num_nodes: int
    launched_at: float
    terminated_at: float | None


@dataclass(frozen=True)
class AttemptCost:
    job_id: str
    owner: str
    job_name: str | None
    attempt: int
    cluster_id: str
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    use_spot: bool
    num_nodes: int
    hourly_price: float  # one node
    on_demand_hourly: float | None  # one node, the catalog's on-demand price for the same place
    started_at: float
    ended_at: float | None  # None: still up
    hours: float
    cost: float
    on_demand_cost: float  # = cost for an on-demand attempt, or when the on-demand price is unknown

    @property
    def on_demand_known(self) -> bool:
        return self.on_demand_hourly is not None

    @property
    def savings(self) -> float:
        return round(self.on_demand_cost - self.cost, 6)

    @property
    def market(self) -> str:
        return "spot" if self.use_spot else "on-demand"

    @property
    def place(self) -> str:
        return "/".join(p for p in (self.cloud, self.region, self.zone) if p)


@dataclass
class CostLine:
    """One group's totals. `spot_cost` + `on_demand_market_cost` = `cost`."""

    key: str
    label: str
    jobs: int = 0
    attempts: int = 0
    hours: float = 0.0
    spot_cost: float = 0.0
    on_demand_market_cost: float = 0.0
    cost: float = 0.0
    on_demand_cost: float = 0.0

    @property
    def savings(self) -> float:
        return round(self.on_demand_cost - self.cost, 6)

    @property
    def savings_percent(self) -> float:
        return round(100.0 * self.savings / self.on_demand_cost, 1) if self.on_demand_cost > 0 else 0.0


@dataclass(frozen=True)
class JobCost:
    job: JobRecord
    attempts: tuple[AttemptCost, ...]

    @property
    def cost(self) -> float:
        return round(sum(a.cost for a in self.attempts), 6)

    @property
    def on_demand_cost(self) -> float:
        return round(sum(a.on_demand_cost for a in self.attempts), 6)

    @property
    def savings(self) -> float:
        return round(self.on_demand_cost - self.cost, 6)


@dataclass(frozen=True)
class CostReport:
    since: float
    until: float
    days: int
    by: str
    all_users: bool
    lines: list[CostLine]
    total: CostLine
    jobs: list[JobCost]
    daily: list[tuple[str, str, float]] = field(default_factory=list)  # (UTC day, cloud, $), in order


def on_demand_hourly(catalog: Catalog, cluster: ClusterRecord) -> float | None:
    """The on-demand $/h of one node of the cluster's instance type in its place, or None if unknown."""
    if not cluster.use_spot:
        return cluster.hourly_price
    prices = [
        o.price
        for o in catalog.by_instance_type(cluster.cloud, cluster.instance_type)
        if o.region == cluster.region and (cluster.zone is None or o.zone in (None, cluster.zone))
    ]
    return min(prices) if prices else None


def attempt_cost(job: JobRecord, cluster: ClusterRecord, catalog: Catalog, now: float) -> AttemptCost:
    end = cluster.terminated_at if cluster.terminated_at is not None else now
    hours = max(0.0, end - cluster.launched_at) / 3600
    price = float(cluster.hourly_price or 0.0)
    cost = round(price * cluster.num_nodes * hours, 6)
    od_hourly = on_demand_hourly(catalog, cluster)
    od_cost = round(od_hourly * cluster.num_nodes * hours, 6) if od_hourly is not None else cost
    return AttemptCost(
        job_id=job.job_id,
        owner=job.owner,
        job_name=job.name,
        attempt=cluster.attempt,
        cluster_id=cluster.cluster_id,
        cloud=cluster.cloud,
        region=cluster.region,
        zone=cluster.zone,
        instance_type=cluster.instance_type,
        use_spot=cluster.use_spot,
        num_nodes=cluster.num_nodes,
        hourly_price=price,
        on_demand_hourly=od_hourly,
        started_at=cluster.launched_at,
        ended_at=cluster.terminated_at,
        hours=hours,
        cost=cost,
        on_demand_cost=od_cost,
    )


def job_costs(
    jobs: Iterable[JobRecord], clusters: Iterable[ClusterRecord], catalog: Catalog, now: float
) -> list[JobCost]:
    """Each job with its attempts' costs, attempts in order; jobs keep their order."""
    by_job: dict[str, list[ClusterRecord]] = defaultdict(list)
    for cluster in clusters:
        by_job[cluster.job_id].append(cluster)
    answer = []
    for job in jobs:
        attempts = sorted(by_job.get(job.job_id, []), key=lambda c: (c.attempt, c.launched_at))
        answer.append(JobCost(job, tuple(attempt_cost(job, c, catalog, now) for c in attempts)))
    return answer


def _day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def split_by_day(attempt: AttemptCost, now: float) -> list[tuple[str, float, float]]:
    """(UTC day, $, on-demand $) of the attempt's cost, split in proportion to its hours on each day."""
    start, end = attempt.started_at, attempt.ended_at if attempt.ended_at is not None else now
    if end <= start:
        return [(_day(start), attempt.cost, attempt.on_demand_cost)]
    parts = []
    moment = start
    while moment < end:
        midnight = datetime.fromtimestamp(moment, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        boundary = min(end, (midnight + timedelta(days=1)).timestamp())
        share = (boundary - moment) / (end - start)
        parts.append((_day(moment), attempt.cost * share, attempt.on_demand_cost * share))
        moment = boundary
    return parts


def build_report(
    jobs: Sequence[JobRecord],
    clusters: Iterable[ClusterRecord],
    catalog: Catalog,
    *,
    by: str,
    since: float,
    now: float,
    days: int,
    all_users: bool = False,
    user_names: dict[str, str] | None = None,
) -> CostReport:
    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {', '.join(GROUPINGS)}")
    names = user_names or {}
    costs = job_costs(jobs, clusters, catalog, now)
    lines: dict[str, CostLine] = {}
    jobs_in: dict[str, set[str]] = defaultdict(set)
    total = CostLine(key="total", label="total")
    daily: dict[tuple[str, str], float] = defaultdict(float)

    def add(line: CostLine, attempt: AttemptCost, cost: float, on_demand: float, hours: float) -> None:
        line.attempts += 1
        line.hours += hours
        line.cost += cost
        line.on_demand_cost += on_demand
        if attempt.use_spot:
            line.spot_cost += cost
        else:
            line.on_demand_market_cost += cost

    for job_cost in costs:
        job = job_cost.job
        for attempt in job_cost.attempts:
            add(total, attempt, attempt.cost, attempt.on_demand_cost, attempt.hours)
            pieces = split_by_day(attempt, now)
            for day, cost, _ in pieces:
                daily[(day, attempt.cloud)] += cost
            if by == "day":
                for day, cost, on_demand in pieces:
                    share = cost / attempt.cost if attempt.cost else 1.0 / len(pieces)
                    line = lines.setdefault(day, CostLine(key=day, label=day))
                    add(line, attempt, cost, on_demand, attempt.hours * share)
                    jobs_in[day].add(job.job_id)
                continue
            key, label = _group_of(job, attempt, by, names)
            line = lines.setdefault(key, CostLine(key=key, label=label))
            add(line, attempt, attempt.cost, attempt.on_demand_cost, attempt.hours)
            jobs_in[key].add(job.job_id)
    for key, line in lines.items():
        line.jobs = len(jobs_in[key])
        _round(line)
    total.jobs = sum(1 for c in costs if c.attempts)
    _round(total)
    ordered = sorted(lines.values(), key=lambda line: line.key if by == "day" else (-line.cost, line.key))
    return CostReport(
        since=since,
        until=now,
        days=days,
        by=by,
        all_users=all_users,
        lines=ordered,
        total=total,
        jobs=costs,
        daily=[(day, cloud, round(cost, 6)) for (day, cloud), cost in sorted(daily.items())],
    )


def _group_of(job: JobRecord, attempt: AttemptCost, by: str, names: dict[str, str]) -> tuple[str, str]:
    if by == "cloud":
        return attempt.cloud, attempt.cloud
    if by == "user":
        return job.owner, names.get(job.owner, job.owner)
    return job.job_id, f"{job.job_id} {job.name}" if job.name else job.job_id


def _round(line: CostLine) -> None:
    for name in ("hours", "spot_cost", "on_demand_market_cost", "cost", "on_demand_cost"):
        setattr(line, name, round(getattr(line, name), 6))


# ------------------------------------------------------------------------------ reading the records


def job_record(job: JobModel) -> JobRecord:
    return JobRecord(
        job_id=job.job_id,
        owner=job.owner,
        name=job.name,
        state=job.state,
        attempt=int(job.attempt),
        created_at=float(job.created_at),
    )


def cluster_record(cluster: ClusterModel) -> ClusterRecord:
    return ClusterRecord(
        cluster_id=cluster.cluster_id,
        job_id=cluster.job_id,
        attempt=int(cluster.attempt),
        cloud=cluster.cloud,
        region=cluster.region,
        zone=cluster.zone,
        instance_type=cluster.instance_type,
        use_spot=bool(cluster.use_spot),
        hourly_price=None if cluster.hourly_price is None else float(cluster.hourly_price),
        num_nodes=int(cluster.num_nodes),
        launched_at=float(cluster.launched_at),
        terminated_at=None if cluster.terminated_at is None else float(cluster.terminated_at),
    )


def attempt_cluster_ids(job: JobRecord) -> list[str]:
    """Every cluster id the job's attempts may have had (an attempt that never launched has none)."""
    return [f"{job.job_id}-{n}" for n in range(job.attempt + 1)]


def clusters_of(settings: Settings, jobs: Sequence[JobRecord]) -> list[ClusterRecord]:
    from shared.wiring import wiring_for

    store = wiring_for(settings).store
    ids = [cid for job in jobs for cid in attempt_cluster_ids(job)]
    return [cluster_record(c) for c in store.clusters_by_id(ids).values()]


def job_attempts(settings: Settings, job: JobModel, *, now: float | None = None) -> JobCost:
    """One job's attempts and what each cost (the job page's table)."""
    from shared.wiring import wiring_for

    record = job_record(job)
    catalog = wiring_for(settings).catalog
    return job_costs([record], clusters_of(settings, [record]), catalog, now or time.time())[0]


def lines_of_pieces(
    pieces: Iterable[CostPiece], by: str, names: dict[str, str]
) -> tuple[list[CostLine], CostLine, list[tuple[str, str, float]]]:
    """Lines, total and daily spend (UTC day, cloud, $) of rollup pieces; `by` one of cloud, user, day."""
    lines: dict[str, CostLine] = {}
    total = CostLine(key="total", label="total")
    daily: dict[tuple[str, str], float] = defaultdict(float)
    for piece in pieces:
        key, label = {
            "cloud": (piece.cloud, piece.cloud),
            "user": (piece.owner, names.get(piece.owner, piece.owner)),
            "day": (piece.day, piece.day),
        }[by]
        for line in (lines.setdefault(key, CostLine(key=key, label=label)), total):
            line.jobs += piece.jobs
            line.attempts += piece.attempts
            line.hours += piece.hours
            line.cost += piece.cost
            line.on_demand_cost += piece.on_demand_cost
            line.spot_cost += piece.spot_cost
            line.on_demand_market_cost += piece.cost - piece.spot_cost
        daily[(piece.day, piece.cloud)] += piece.cost
    for line in (*lines.values(), total):
        _round(line)
    ordered = sorted(lines.values(), key=lambda line: line.key if by == "day" else (-line.cost, line.key))
    return ordered, total, [(day, cloud, round(cost, 6)) for (day, cloud), cost in sorted(daily.items())]


def report_days(now: float, days: int) -> tuple[str, str, float]:
    """(first UTC day, today, the first day's midnight) of a report over the last `days` UTC days."""
    first = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(
        days=days - 1
    )
    return first.strftime("%Y-%m-%d"), _day(now), first.timestamp()


def live_pieces(wiring: Wiring, owner: str | None, now: float) -> list[CostPiece]:
    """What the clusters still up have cost so far, one piece per day (the live indexes: reads grow with
    what runs, not with history)."""
    clusters = wiring.store.live_clusters()
    if not clusters:
        return []
    owners = {job.job_id: job.owner for job in wiring.store.live_jobs()}
    for cluster in clusters:
        if cluster.job_id not in owners:  # a cluster whose job has ended, not yet torn down
            job = wiring.store.get(cluster.job_id)
            owners[cluster.job_id] = job.owner if job is not None else "unknown"
    mine = [c for c in clusters if owner is None or owners[c.job_id] == owner]
    earlier = [f"{c.job_id}-{n}" for c in mine for n in range(int(c.attempt))]
    found = set(wiring.store.clusters_by_id(earlier)) if earlier else set()
    pieces = []
    for cluster in mine:
        first = not any(f"{cluster.job_id}-{n}" in found for n in range(int(cluster.attempt)))
        facts = AttemptFacts(owners[cluster.job_id], on_demand_price(wiring, cluster), first)
        pieces += cluster_pieces(cluster, facts, now)
    return pieces


def cost_report(
    settings: Settings,
    *,
    owner: str | None,
    days: int = 7,
    by: str = "cloud",
    now: float | None = None,
) -> CostReport:
    """What `owner`'s jobs (or everyone's: owner None, the caller has checked that an admin asks) cost on
    each of the last `days` UTC days: the rollups of ended attempts, and the clusters still up. Exact after
    the job detail has expired, at any number of jobs. `jobs` lists the newest `MAX_LISTED_JOBS` jobs
    submitted in those days (the job detail), and so do the lines of `by="job"`."""
    from shared.store.users import user_names
    from shared.wiring import wiring_for

    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {', '.join(GROUPINGS)}")
    now = now or time.time()
    first_day, today, since = report_days(now, days)
    wiring = wiring_for(settings)
    pieces = wiring.store.cost_pieces(first_day, today, owner)
    pieces += in_days(live_pieces(wiring, owner, now), first_day, today)
    names = user_names(settings) if owner is None or by == "user" else {}
    lines, total, daily = lines_of_pieces(pieces, "cloud" if by == "job" else by, names)
    jobs = [job_record(row) for row in wiring.store.newest_jobs(owner, since=since, limit=MAX_LISTED_JOBS)]
    listed = build_report(
        jobs, clusters_of(settings, jobs), wiring.catalog, by="job", since=since, now=now, days=days
    )
    return CostReport(
        since=since,
        until=now,
        days=days,
        by=by,
        all_users=owner is None,
        lines=listed.lines if by == "job" else lines,
        total=total,
        jobs=listed.jobs,
        daily=daily,
    )
