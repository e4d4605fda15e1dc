"""The queue message bodies (docs/architecture.md, "Queues and message bodies") and their senders."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

from shared.events.sqs_batch import body_float, body_int, body_text
from shared.wiring import Wiring

ProvisionAction = Literal["launch", "teardown", "deadline_check", "group_step"]
PROVISION_ACTIONS: tuple[ProvisionAction, ...] = ("launch", "teardown", "deadline_check", "group_step")


@dataclass(frozen=True, kw_only=True)
class OptimizeMessage:
    job_id: str
    attempt: int

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> OptimizeMessage:
        """The body (other keys ignored); a body of another shape is MalformedMessage (it never succeeds)."""
        kind = cls.__name__
        return cls(job_id=body_text(body, "job_id", kind), attempt=body_int(body, "attempt", kind))


@dataclass(frozen=True, kw_only=True)
class ProvisionMessage:
    job_id: str
    attempt: int
    action: ProvisionAction = "launch"
    cluster_id: str | None = None
    not_before: float | None = None  # epoch seconds: a deadline job's message due later than SQS can delay

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ProvisionMessage:
        """The body (other keys ignored); a body of another shape is MalformedMessage (it never succeeds)."""
        kind = cls.__name__
        action = body_text(body, "action", kind, PROVISION_ACTIONS) if "action" in body else "launch"
        cluster_id = body.get("cluster_id")
        return cls(
            job_id=body_text(body, "job_id", kind),
            attempt=body_int(body, "attempt", kind),
            action=cast(ProvisionAction, action),
            cluster_id=None if cluster_id is None else body_text(body, "cluster_id", kind),
            not_before=body_float(body, "not_before", kind),
        )

    def as_body(self) -> dict[str, Any]:
        """The message body (fields left None are left out)."""
        return {name: value for name, value in asdict(self).items() if value is not None}


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
