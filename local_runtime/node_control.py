"""What `skyless local status` and `skyless local preempt` do to a running local runtime."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_runtime.local_settings import local_client
from shared.clouds.local import NODE_FILE, PREEMPTION_NOTICE_SECONDS, LocalCloud
from shared.config import QUEUE_KINDS, Settings
from shared.errors import NotFoundError


@dataclass(frozen=True)
class QueueDepth:
    kind: str
    visible: int
    in_flight: int
    delayed: int
    dead_letters: int


def queue_depths(settings: Settings) -> list[QueueDepth]:
    sqs = local_client("sqs", settings)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]  # fmt: skip
    depths = []
    for kind in QUEUE_KINDS:
        url = sqs.get_queue_url(QueueName=settings.queue_name(kind))["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        dlq_url = sqs.get_queue_url(QueueName=f"{settings.queue_name(kind)}-dlq")["QueueUrl"]
        dlq = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=[names[0]])["Attributes"]
        visible, in_flight, delayed = (int(attrs.get(n, 0)) for n in names)
        depths.append(QueueDepth(kind, visible, in_flight, delayed, int(dlq.get(names[0], 0))))
    return depths


def live_node_records(home: Path) -> list[dict[str, Any]]:
    """The node.json of every local node whose process is alive."""
    cloud = LocalCloud(home)
    live = {(n.cluster_id, n.instance_id) for n in cloud.list_owned() if n.state == "running"}
    records = []
    for path in sorted((home / "local" / "nodes").glob(f"*/*/{NODE_FILE}")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (record.get("cluster_id"), record.get("instance_id")) in live:
            records.append(record)
    return records


def preempt_job_node(
    settings: Settings, job_id: str, rank: int = 0, grace_seconds: float = PREEMPTION_NOTICE_SECONDS
) -> dict[str, Any]:
    """Preempt one node of a job (the local cloud gives the notice, waits, kills) and put the spot
    interruption event on EventBridge, whose rule routes it to the spot_watch queue. Answers the event."""
    event = LocalCloud(settings.home).preempt(job_id, rank, notice_seconds=grace_seconds)
    if event is None:
        raise NotFoundError(
            f"job {job_id} has no live node of rank {rank} on the local cloud",
            field="job_id", hint="`skyless local status` lists live nodes",
        )  # fmt: skip
    entry = {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event["detail"]),
        "Resources": event["resources"],
    }
    answer = local_client("events", settings).put_events(Entries=[entry])
    if answer.get("FailedEntryCount"):
        raise RuntimeError(f"EventBridge refused the preemption event: {answer['Entries']}")
    return event
