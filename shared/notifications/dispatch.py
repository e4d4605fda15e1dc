"""One timeline event → the notifications it calls for, each sent at most once and recorded.

Idempotent: each (event, channel) is claimed with a conditional write before sending, so a stream
record delivered twice sends once (a crash between the claim and the send loses that one notification
rather than sending it twice). A delivery that fails is recorded as failed; it never touches the job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from shared.config import Settings
from shared.notifications.deliveries import Delivery
from shared.notifications.events import (
    BUDGET_KIND,
    NOTIFY_KIND,
    UPLOAD_PREFIX,
    JobFacts,
    TimelineRecord,
    compose,
    needs_history,
    record_from_image,
    topic_of,
)
from shared.notifications.market_changes import MARKET_TOPIC, compose_market, is_planned_move, market_change
from shared.notifications.overruns import OVERRUN_TOPIC, compose_overrun
from shared.notifications.records import send_key
from shared.notifications.recoveries import (
    GATES,
    RESTARTING,
    compose_restart,
    recovering_topic,
    running_topic,
)
from shared.notifications.sending import deliver, happened_before
from shared.notifications.settings import Channels, channels_for
from shared.wiring import wiring_for

log = logging.getLogger("skyless.notify")
TOPIC_GATE = {"upload_rejected": "failed", **GATES}  # which user topic lets this one through


def notify_event(settings: Settings, record: TimelineRecord) -> list[Delivery]:
    """Send what `record` calls for to its job's channels; answers the deliveries made now."""
    if record.kind == NOTIFY_KIND:
        return []
    if record.job_id.startswith("team#"):
        from shared.notifications.team_notices import notify_team

        return notify_team(settings, record)
    store = wiring_for(settings).store
    earlier: list[TimelineRecord] = []
    if needs_history(record):
        earlier = [
            _record_of(e)
            for e in store.timeline(record.job_id)
            if e.kind == "state" and e.at < record.at and e.state
        ]
    topics = topics_of(record, earlier)
    if not topics:
        return []
    if record.job_id.startswith(UPLOAD_PREFIX):  # a task file that could not run: no job, the owner is noted
        owner, job_id = str(record.detail.get("owner") or ""), None
    else:
        job = store.get(record.job_id)
        if job is None:
            return []
        owner, job_id = job.owner, job.job_id
    channels = channels_for(settings, owner, job_id)
    topics = [t for t in topics if TOPIC_GATE.get(t, t) in channels.topics]
    if not topics:
        return []
    if happened_before(record.at, channels.since):  # e.g. replayed at `local up` after `notify set`
        log.info("not announcing %s %s: it happened before notifications were set up", record.job_id, topics)
        return []
    facts = facts_for(settings, record)
    records = wiring_for(settings).notifications
    deliveries = []
    for topic in topics:
        change = market_change(record, earlier) if topic == MARKET_TOPIC else None
        if change:
            notification = compose_market(change, record, facts)
        elif topic == RESTARTING:
            notification = compose_restart(record, facts)
        elif topic == OVERRUN_TOPIC:
            notification = compose_overrun(record, facts)
        else:
            notification = compose(topic, record, facts)
        also = topic if topic == MARKET_TOPIC else None  # its own send record: a RUNNING may also recover
        for channel, target in (("slack", channels.slack_webhook), ("email", channels.email)):
            if not target:
                continue
            key = send_key(record.job_id, record.at, channel, also=also)
            if not records.claim_send(key):
                continue
            delivery = deliver(settings, channel, target, notification)
            records.finish_send(key, ok=delivery.ok, attempts=delivery.attempts)
            store.note(
                record.job_id,
                NOTIFY_KIND,
                f"{channel} notification {'sent' if delivery.ok else 'failed'} ({topic})",
                detail={**delivery.as_dict(), "topic": topic, "event": record.at},
            )
            log.info(
                "%s %s notification for %s: %s", topic, channel, record.job_id, delivery.as_dict()["status"]
            )
            deliveries.append(delivery)
    return deliveries


def topics_of(record: TimelineRecord, earlier: Sequence[TimelineRecord]) -> list[str]:
    """The topics one event tells, in order: its state's, then a deadline job's market change. A policy's
    planned move is neither a preemption nor a recovery; a move to RECOVERING says which it was
    (shared/notifications/recoveries.py)."""
    if record.kind == BUDGET_KIND and record.detail.get("team"):
        return []  # a job's record of its team's threshold: the team's own event tells every member
    topic = topic_of(record, [e.state for e in earlier if e.state])
    if topic in ("preempted", "recovered") and is_planned_move(record, earlier):
        topic = None
    elif topic == "preempted":
        topic = recovering_topic(record)
    elif topic == "recovered":
        topic = running_topic(earlier)
    found = [topic] if topic else []
    if market_change(record, earlier) is not None:
        found.append(MARKET_TOPIC)
    return found


def _record_of(event: Any) -> TimelineRecord:
    detail = event.detail
    plain = detail.as_dict() if hasattr(detail, "as_dict") else dict(detail or {})
    return TimelineRecord(
        job_id=event.job_id, at=event.at, kind=str(event.kind or ""), state=event.state,
        message=str(event.message or ""), detail=plain,
    )  # fmt: skip


def facts_for(settings: Settings, record: TimelineRecord) -> JobFacts:
    if record.job_id.startswith(UPLOAD_PREFIX):
        return JobFacts(
            job_id=record.job_id, name=record.job_id.removeprefix(UPLOAD_PREFIX), state="REJECTED"
        )
    return job_facts(settings, record.job_id)


def job_facts(settings: Settings, job_id: str) -> JobFacts:
    from shared.jobs.views import job_view

    store = wiring_for(settings).store
    job = store.get(job_id)
    if job is None:
        return JobFacts(job_id=job_id, name=None, state="UNKNOWN")
    view = job_view(job, store.cluster(job.cluster_id), None)
    return JobFacts(
        job_id=job_id,
        name=view.name,
        state=view.state,
        cloud=view.cloud,
        region=view.region,
        zone=view.zone,
        instance_type=view.instance_type,
        use_spot=view.use_spot,
        cost=float(view.cost or 0.0),
        reason=view.reason,
    )


def notify_stream_records(settings: Settings, records: Iterable[dict[str, Any]]) -> list[str]:
    """A DynamoDB stream batch (Lambda's shape); answers the sequence numbers to retry."""
    failed: list[str] = []
    for item in records:
        stream = item.get("dynamodb") or {}
        if item.get("eventName") != "INSERT" or "NewImage" not in stream:
            continue
        record = record_from_image(stream["NewImage"])
        if record is None:
            continue
        try:
            notify_event(settings, record)
        except Exception:
            log.exception("notifying %s %s failed; it will be retried", record.job_id, record.at)
            failed.append(str(stream.get("SequenceNumber", "")))
    return failed


def send_test(settings: Settings, owner: str) -> list[Delivery]:
    """A test message to the owner's channels now (not recorded in any job's timeline)."""
    channels: Channels = channels_for(settings, owner, None)
    facts = JobFacts(job_id="job-000000000000", name="test", state="RUNNING", cloud="local", region="local")
    record = TimelineRecord(
        job_id=facts.job_id, at="", kind="test", state=None, message="skyless can reach you."
    )
    notification = compose("test", record, facts)
    targets = (("slack", channels.slack_webhook), ("email", channels.email))
    return [deliver(settings, channel, target, notification) for channel, target in targets if target]
