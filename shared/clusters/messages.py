"""The queue messages of named clusters (on the provision queue, beside the jobs' launch/teardown) and
their senders. A body carries `cluster` (the cluster's key) where a job's carries `job_id`:

    {"cluster": "cl-…", "action": "launch" | "start", "incarnation": n}   nodes up (INIT)
    {"cluster": "cl-…", "action": "stop" | "down"}                       nodes down (STOPPING, TERMINATING)
    {"cluster": "cl-…", "action": "autostop", "idle_since": t}           still idle? (delayed)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from shared.wiring import Wiring

Action = Literal["launch", "start", "stop", "down", "autostop"]
MAX_DELAY_SECONDS = 900  # SQS's limit; longer waits are chained


class ClusterMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    cluster: str
    action: Action
    incarnation: int | None = None
    idle_since: float | None = None


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
    body: dict[str, Any] = {"cluster": key, "action": action}
    if incarnation is not None:
        body["incarnation"] = incarnation
    if idle_since is not None:
        body["idle_since"] = idle_since
    delay = max(0, min(MAX_DELAY_SECONDS, int(delay_seconds + 0.999)))
    wiring.queues.provision.send(body, delay_seconds=delay)
