"""The queue message bodies (docs/architecture.md, "Queues and message bodies") and their senders."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from shared.events.sqs_batch import MalformedMessage
from shared.wiring import Wiring

Message = TypeVar("Message", bound=BaseModel)


class OptimizeMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str
    attempt: int


class ProvisionMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str
    attempt: int
    action: Literal["launch", "teardown", "deadline_check", "group_step"] = "launch"
    cluster_id: str | None = None
    not_before: float | None = None  # epoch seconds: a deadline job's message due later than SQS can delay


def parse_message(model: type[Message], body: dict[str, Any]) -> Message:
    """The body as `model`; a body of another shape is MalformedMessage (it can never succeed)."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise MalformedMessage(f"not a {model.__name__}: {where}: {first['msg']}") from None


def send_optimize(wiring: Wiring, job_id: str, attempt: int, delay_seconds: int = 0) -> None:
    wiring.queues.optimize.send({"job_id": job_id, "attempt": attempt}, delay_seconds=delay_seconds)


def send_launch(wiring: Wiring, job_id: str, attempt: int, delay_seconds: int = 0) -> None:
    body = {"job_id": job_id, "attempt": attempt, "action": "launch"}
    wiring.queues.provision.send(body, delay_seconds=delay_seconds)


def send_teardown(wiring: Wiring, job_id: str, attempt: int, cluster_id: str) -> None:
    body: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "action": "teardown"}
    body["cluster_id"] = cluster_id
    wiring.queues.teardown.send(body)  # its own queue, so a burst of launches never delays it


def cluster_id_for(job_id: str, attempt: int) -> str:
    """One cluster per (job, attempt): its id is also the launch's idempotency key."""
    return f"{job_id}-{attempt}"
