"""The API's job and cluster listings as the JSON it sends, typed for mypy and read as they come: a table
needs no model built to print (the server built them from shared.api's models, whose fields these keys
are: tests/unit/test_cli_lazy_verbs.py holds them to those)."""

from __future__ import annotations

from typing import TypedDict


class JobRow(TypedDict):
    """shared.api.models.JobSummary."""

    job_id: str
    job_number: int | None
    name: str | None
    state: str
    cloud: str | None
    region: str | None
    zone: str | None
    instance_type: str | None
    use_spot: bool | None
    recoveries: int
    attempt: int
    created_at: str | None
    updated_at: str | None
    cost: float
    source: str | None
    source_ref: str | None
    max_cost: float | None
    budget_stop: str | None
    owner: str | None


class JobPage(TypedDict):
    """shared.api.models.JobList."""

    jobs: list[JobRow]
    cursor: str | None


class ClusterRow(TypedDict):
    """shared.api.cluster_models.ClusterView."""

    name: str
    cluster_id: str
    state: str
    reason: str | None
    cloud: str | None
    region: str | None
    zone: str | None
    instance_type: str | None
    use_spot: bool
    num_nodes: int
    accelerator: str | None
    accelerator_count: float
    hourly_price: float | None
    autostop_minutes: int
    autostop_down: bool
    autostop: str
    idle_since: str | None
    cost: float
    active_jobs: int
    created_at: str | None
    up_since: str | None
    provider: str | None
    provider_cluster: str | None
    owner: str | None
