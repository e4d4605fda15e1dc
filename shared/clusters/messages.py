"""The queue messages of named clusters (on the provision queue, beside the jobs' launch/teardown) and
their senders. A body carries `cluster` (the cluster's key) where a job's carries `job_id`:

    {"cluster": "cl-…", "action": "launch" | "start", "incarnation": n}   nodes up (INIT)
    {"cluster": "cl-…", "action": "stop" | "down"}                       nodes down (STOPPING, TERMINATING)
    {"cluster": "cl-…", "action": "autostop", "idle_since": t}           still idle? (delayed)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from shared.events.sqs_batch import body_float, body_int, body_text
from shared.wiring import Wiring

Action = Literal["launch", "start", "stop", "down", "autostop"]
ACTIONS: tuple[Action, ...] = ("launch", "start", "stop", "down", "autostop")
MAX_DELAY_SECONDS = 900  # SQS's limit; longer waits are chained


@dataclass(frozen=True, kw_only=True)
class ClusterMessage:
    cluster: str
    action: Action
    incarnation: int | None = None
    idle_since: float | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ClusterMessage:
        """The body (other keys ignored); a body of another shape is MalformedMessage (it never succeeds)."""
        kind = cls.__name__
        incarnation = body.get("incarnation")
        return cls(
            cluster=body_text(body, "cluster", kind),
            action=cast(Action, body_text(body, "action", kind, ACTIONS)),
            incarnation=None if incarnation is None else body_int(body, "incarnation", kind),
            idle_since=body_float(body, "idle_since", kind),
        )

    def as_body(self) -> dict[str, Any]:
        """The message body (fields left None are left out)."""
        body: dict[str, Any] = {"cluster": self.cluster, "action": self.action}
        if self.incarnation is not None:
            body["incarnation"] = self.incarnation
        if self.idle_since is not None:
            body["idle_since"] = self.idle_since
        return body


def is_cluster_message(body: dict[str, Any]) -> bool:
    return "cluster" in body and "job_id" not in body


def send_cluster_step(
    wiring: Wiring,
    key: str,
    action: Action,
    *,
    incarnation: int | None = None,
    idle_since: float | None = None,
    delay_seconds: float = 0,
) -> None:
    message = ClusterMessage(cluster=key, action=action, incarnation=incarnation, idle_since=idle_since)
    delay = max(0, min(MAX_DELAY_SECONDS, int(delay_seconds + 0.999)))
    wiring.queues.provision.send(message.as_body(), delay_seconds=delay)
