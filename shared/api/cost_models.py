"""The API body of a cost report (`GET /costs`), built from shared.jobs.cost_report.CostReport."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from shared.api.deferred_model import DeferredModel

if TYPE_CHECKING:  # the CLI reads these bodies without the report's code (catalog, tables)
    from shared.jobs.cost_report import AttemptCost, CostLine, CostReport, JobCost


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat()


class AttemptCostView(DeferredModel):
    attempt: int
    cluster_id: str
    cloud: str
    region: str
    zone: str | None = None
    instance_type: str
    market: Literal["spot", "on-demand"]
    num_nodes: int
    hourly_price: float = Field(description="USD per hour for one node, as planned.")
    on_demand_hourly: float | None = Field(
        None, description="The catalog's on-demand USD/h of one node in the same place (None: unknown)."
    )
    started_at: str
    ended_at: str | None = Field(None, description="None: the cluster is still up.")
    hours: float
    cost: float
    on_demand_cost: float
    savings: float

    @classmethod
    def of(cls, attempt: AttemptCost) -> AttemptCostView:
        return cls(
            attempt=attempt.attempt,
            cluster_id=attempt.cluster_id,
            cloud=attempt.cloud,
            region=attempt.region,
            zone=attempt.zone,
            instance_type=attempt.instance_type,
            market="spot" if attempt.use_spot else "on-demand",
            num_nodes=attempt.num_nodes,
            hourly_price=attempt.hourly_price,
            on_demand_hourly=attempt.on_demand_hourly,
            started_at=_iso(attempt.started_at) or "",
            ended_at=_iso(attempt.ended_at),
            hours=round(attempt.hours, 6),
            cost=attempt.cost,
            on_demand_cost=attempt.on_demand_cost,
            savings=attempt.savings,
        )


class JobCostView(DeferredModel):
    job_id: str
    name: str | None = None
    owner: str
    state: str
    created_at: str
    cost: float
    on_demand_cost: float
    savings: float
    attempts: list[AttemptCostView]

    @classmethod
    def of(cls, job: JobCost) -> JobCostView:
        return cls(
            job_id=job.job.job_id,
            name=job.job.name,
            owner=job.job.owner,
            state=job.job.state,
            created_at=_iso(job.job.created_at) or "",
            cost=job.cost,
            on_demand_cost=job.on_demand_cost,
            savings=job.savings,
            attempts=[AttemptCostView.of(a) for a in job.attempts],
        )


class CostLineView(DeferredModel):
    key: str
    label: str
    jobs: int
    attempts: int
    hours: float
    spot_cost: float = Field(description="USD of attempts on spot.")
    on_demand_market_cost: float = Field(description="USD of attempts on on-demand.")
    cost: float
    on_demand_cost: float = Field(description="USD had every attempt run on-demand in the same place.")
    savings: float
    savings_percent: float

    @classmethod
    def of(cls, line: CostLine) -> CostLineView:
        return cls(
            key=line.key,
            label=line.label,
            jobs=line.jobs,
            attempts=line.attempts,
            hours=round(line.hours, 6),
            spot_cost=line.spot_cost,
            on_demand_market_cost=line.on_demand_market_cost,
            cost=line.cost,
            on_demand_cost=line.on_demand_cost,
            savings=line.savings,
            savings_percent=line.savings_percent,
        )


class DailySpend(DeferredModel):
    day: str = Field(description="UTC date, YYYY-MM-DD.")
    cloud: str
    cost: float


class ClusterCostView(DeferredModel):
    name: str
    owner: str
    state: str
    cloud: str | None = None
    region: str | None = None
    instance_type: str | None = None
    use_spot: bool = False
    num_nodes: int = 1
    cost: float = Field(description="USD so far: every period its nodes were up, this one to now.")


class ReservationUseView(DeferredModel):
    """One reservation over the report's window: node-hours paid for, used by the report's jobs, and idle."""

    reservation: str
    cloud: str
    place: str
    instance_type: str
    count: int
    paid_hours: float = Field(description="Node-hours of the reservation's term inside the window.")
    used_hours: float = Field(description="Node-hours the report's jobs ran in it.")
    idle_hours: float = Field(description="paid_hours - used_hours: paid for, not used.")
    idle_cost: float | None = Field(None, description="USD of idle_hours at its hourly_price, if declared.")


class StorageCostView(DeferredModel):
    bucket: str
    store: str
    gigabytes: float | None = Field(description="Listed size now (None: the store did not answer).")
    complete: bool = Field(description="False: a lower bound (the listing stopped at 10,000 objects).")
    per_gb_month: float
    days: float = Field(description="Days of the report's window the bucket was held.")
    cost: float = Field(description="USD: GB x $/GB-month x days held / 30.44.")


class CostReportResponse(DeferredModel):
    since: str
    until: str
    days: int
    by: Literal["cloud", "user", "job", "day"]
    all_users: bool = Field(description="Every user's jobs (an admin key asked), else the caller's.")
    currency: str = "USD"
    lines: list[CostLineView]
    total: CostLineView
    jobs: list[JobCostView] = Field(
        description="The newest 200 jobs submitted in those days with a launched attempt, newest first "
        "(`lines` and `total` count every job; with by=job, `lines` are these jobs' whole costs)."
    )
    daily: list[DailySpend] = Field(description="Spend per UTC day and cloud.")
    clusters: list[ClusterCostView] = Field(
        default_factory=list,
        description="Named clusters not torn down (`launch -c`), each with its cost so far; not in `total`.",
    )
    clusters_cost: float = Field(0.0, description="USD of `clusters`.")
    reservations: list[ReservationUseView] = Field(
        default_factory=list, description="The deployment's reservations: hours used and paid for but idle."
    )
    storage: list[StorageCostView] = Field(
        default_factory=list, description="Buckets skyless created for the caller's tasks; not in `total`."
    )
    storage_cost: float = Field(0.0, description="USD of `storage`.")

    @classmethod
    def of(cls, report: CostReport) -> CostReportResponse:
        return cls(
            since=_iso(report.since) or "",
            until=_iso(report.until) or "",
            days=report.days,
            by=report.by,
            all_users=report.all_users,
            lines=[CostLineView.of(line) for line in report.lines],
            total=CostLineView.of(report.total),
            jobs=[JobCostView.of(job) for job in report.jobs if job.attempts],
            daily=[DailySpend(day=day, cloud=cloud, cost=cost) for day, cloud, cost in report.daily],
        )

    def with_reservations(self, uses: list[dict[str, object]]) -> CostReportResponse:
        return self.model_copy(update={"reservations": [ReservationUseView.model_validate(u) for u in uses]})

    def with_storage(self, costs: list[object]) -> CostReportResponse:
        views = [StorageCostView.model_validate(c, from_attributes=True) for c in costs]
        return self.model_copy(
            update={"storage": views, "storage_cost": round(sum(v.cost for v in views), 6)}
        )

    def with_clusters(self, clusters: list[dict[str, object]]) -> CostReportResponse:
        views = [ClusterCostView.model_validate(c) for c in clusters]
        return self.model_copy(
            update={"clusters": views, "clusters_cost": round(sum(v.cost for v in views), 6)}
        )
