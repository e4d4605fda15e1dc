"""The API body of the provider scorecard (`GET /reports/providers`), from shared/reports/."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import Field

from shared.api.deferred_model import DeferredModel

if TYPE_CHECKING:  # the CLI reads these bodies without the report's code
    from shared.reports.provider_scorecard import ProviderLine, Scorecard


class ProviderLineView(DeferredModel):
    cloud: str
    region: str
    family: str = Field(description="Instance family (p4d, a2, Standard_NC, ...).")
    launch_requests: int = Field(
        description="Launches asked of this place: those that worked and those refused."
    )
    launches: int
    capacity_refusals: int = Field(description="Launches refused for lack of capacity.")
    other_refusals: int = Field(description="Launches refused for quota, credentials or a transient error.")
    refusal_rate: float = Field(description="Refused launches / launch requests (0..1).")
    median_seconds_to_running: float | None = Field(None, description="From launch to RUNNING, median.")
    max_seconds_to_running: float | None = None
    spot_hours: float = Field(description="Node-hours on spot.")
    preemptions: int
    warned_preemptions: int = Field(description="Preemptions that came with a notice before the node went.")
    preemptions_per_spot_hour: float | None = None
    node_failures: int = Field(
        description="Nodes lost other than by preemption (not the task's own failures)."
    )
    cost: float = Field(description="USD paid at the planned price.")
    list_cost: float = Field(description="USD at the catalog's on-demand list price for the same hours.")
    percent_of_list: float | None = Field(
        None, description="cost / list_cost in percent (None: no list price)."
    )

    @classmethod
    def of(cls, line: ProviderLine) -> ProviderLineView:
        return cls(
            cloud=line.cloud,
            region=line.region,
            family=line.family,
            launch_requests=line.launch_requests,
            launches=line.launches,
            capacity_refusals=line.capacity_refusals,
            other_refusals=line.other_refusals,
            refusal_rate=line.refusal_rate,
            median_seconds_to_running=line.median_seconds_to_running,
            max_seconds_to_running=line.max_seconds_to_running,
            spot_hours=line.spot_hours,
            preemptions=line.preemptions,
            warned_preemptions=line.warned_preemptions,
            preemptions_per_spot_hour=line.preemptions_per_spot_hour,
            node_failures=line.node_failures,
            cost=line.cost,
            list_cost=line.list_cost,
            percent_of_list=line.percent_of_list,
        )


class ProviderScorecardResponse(DeferredModel):
    since: str
    until: str
    days: int
    all_users: bool
    jobs_read: int = Field(description="Jobs whose records the report read.")
    lines: list[ProviderLineView]

    @classmethod
    def of(cls, card: Scorecard) -> ProviderScorecardResponse:
        def iso(epoch: float) -> str:
            return datetime.fromtimestamp(epoch, UTC).isoformat()

        return cls(
            since=iso(card.since),
            until=iso(card.until),
            days=card.days,
            all_users=card.all_users,
            jobs_read=card.jobs_read,
            lines=[ProviderLineView.of(line) for line in card.lines],
        )
