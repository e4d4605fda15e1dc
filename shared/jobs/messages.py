"""The queue message bodies (docs/architecture.md, "Queues and message bodies") and their senders."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from shared.wiring import Wiring


class OptimizeMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str
    attempt: int


class ProvisionMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str
    attempt: int
    action: Literal["launch", "teardown"] = "launch"
    cluster_id: str | None = None


def send_optimize(wiring: Wiring, job_id: str, attempt: int, delay_seconds: int = 0) -> None:
    wiring.queues.optimize.send({"job_id": job_id, "attempt": attempt}, delay_seconds=delay_seconds)


def send_launch(wiring: Wiring, job_id: str, attempt: int, delay_seconds: int = 0) -> None:
    body = {"job_id": job_id, "attempt": attempt, "action": "launch"}
    wiring.queues.provision.send(body, delay_seconds=delay_seconds)


def send_teardown(wiring: Wiring, job_id: str, attempt: int, cluster_id: str) -> None:
    body: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "action": "teardown"}
    body["cluster_id"] = cluster_id
    wiring.queues.provision.send(body)


def cluster_id_for(job_id: str, attempt: int) -> str:
    """One cluster per (job, attempt): its id is also the launch's idempotency key."""
    return f"{job_id}-{attempt}"
