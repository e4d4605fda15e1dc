"""The bodies of the HTTPS API's /schedules routes (the OpenAPI description is generated from these)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.api.deferred_model import DeferredModel
from shared.api.models import PlanRequest

Overlap = Literal["skip", "allow"]


class CreateScheduleRequest(PlanRequest):
    name: str = Field(min_length=1, max_length=64, description="Unique among the caller's schedules.")
    cron: str = Field(min_length=1, max_length=128, description='Five-field Unix cron, e.g. "0 3 * * *".')
    timezone: str = Field("UTC", max_length=64, description="IANA time zone the cron is read in.")
    overlap: Overlap = Field("skip", description="skip: no firing while the previous run is live; allow.")
    secrets: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="Values of the task's `secrets` (null ones must be given), as POST /jobs takes them: "
        "kept in Secrets Manager for the schedule's firings, never in a table, never answered.",
    )


class ScheduleView(DeferredModel):
    name: str
    schedule_id: str
    cron: str
    timezone: str
    overlap: Overlap
    paused: bool
    filename: str
    env: dict[str, str] = Field(default_factory=dict)
    secrets: list[str] = Field(
        default_factory=list, description="The names of its secrets; never the values."
    )
    created_at: str
    next_run: str | None = None
    last_job_id: str | None = None
    last_fired_at: str | None = None
    runs: int = 0
    skipped: int = 0


class ScheduleList(DeferredModel):
    schedules: list[ScheduleView]
