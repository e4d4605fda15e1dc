"""Which timeline events notify, and what the notification says. Pure: no I/O.

A timeline event is a row of the events table (shared/store/models.py: EventModel). Topics:
- `preempted`: the job entered RECOVERING (a spot node was taken away or fell silent); the dispatch tells
  a restart after the task's own failure and a lost node apart (shared/notifications/recoveries.py);
- `recovered`: RUNNING again after a RECOVERING since the last RUNNING;
- `succeeded` / `failed`: the terminal states (CANCELLED does not notify: the user asked for it);
- `no_capacity`: the first WAITING of an attempt (nothing had capacity; it retries), and a FAILED
  whose reason is "no capacity anywhere ...".
- `budget`: a job reached 50, 80 or 100 % of its cost cap or of its owner's monthly budget (kind `budget`,
  written once per threshold by shared/jobs/budget_checks.py); a team's budget is told by an event in the
  team's partition (`team#<team>`) to every member (shared/notifications/team_notices.py), not by the jobs';
- `market`: a deadline job moved between spot and on-demand, or started on on-demand (told by the RUNNING
  after the launch: shared/notifications/market_changes.py);
- `overrun`: a deadline job's work counted reached its `--hours` estimate while it still runs (kind
  `overrun`, written once by shared/jobs/deadline_launch.py: shared/notifications/overruns.py);
- `upload_rejected`: a task file uploaded under `tasks/` could not run (shared/uploads/intake.py notes it
  under `upload#<key>` with kind `upload_rejected`); it is gated by the owner's `failed` topic.
Events the notifier writes itself (kind `notify`) never notify.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.aws.stream_images import plain_image

TOPICS: tuple[str, ...] = (
    "preempted", "recovered", "succeeded", "failed", "no_capacity", "budget", "market", "overrun",
)  # fmt: skip
DEFAULT_TOPICS: tuple[str, ...] = TOPICS
NOTIFY_KIND = "notify"
UPLOAD_REJECTED_KIND = "upload_rejected"
BUDGET_KIND = "budget"  # a job reached 50/80/100 % of its cost cap or its owner's monthly budget
OVERRUN_KIND = "overrun"  # a deadline job ran past its estimate (shared/jobs/deadlines.py writes the same)
UPLOAD_PREFIX = "upload#"
TEAM_PREFIX = "team#"  # a team's events (its budget's thresholds: shared/notifications/team_notices.py)
NO_CAPACITY_REASON = "no capacity"

HEADLINES = {
    "preempted": "was preempted; recovering",
    "node_lost": "lost a node; recovering",
    "recovered": "recovered and is running again",
    "restarted": "restarted and is running again",
    "policy_wait": "was stopped by its deadline policy; waiting",
    "succeeded": "succeeded",
    "failed": "failed",
    "no_capacity": "found no capacity anywhere",
    "upload_rejected": "was rejected",
    "budget": "reached a budget threshold",
    "market": "changed market",
    "overrun": "ran past its --hours estimate",
    "test": "test notification",
}


@dataclass(frozen=True)
class TimelineRecord:
    job_id: str
    at: str
    kind: str
    state: str | None
    message: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobFacts:
    """What a notification says about the job (from the job's view at send time)."""

    job_id: str
    name: str | None
    state: str
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    use_spot: bool | None = None
    cost: float = 0.0
    reason: str | None = None


@dataclass(frozen=True)
class Notification:
    topic: str
    subject: str
    event_message: str
    facts: JobFacts
    extra_lines: tuple[tuple[str, str], ...] = ()  # the topic's own facts, after the job's

    @property
    def is_upload(self) -> bool:
        return self.topic == "upload_rejected"

    @property
    def is_test(self) -> bool:
        return self.topic == "test"

    @property
    def is_team(self) -> bool:
        return self.facts.job_id.startswith(TEAM_PREFIX)

    @property
    def logs_command(self) -> str:
        if self.is_team:
            return f"skyless budget show --team {self.facts.job_id.removeprefix(TEAM_PREFIX)}"
        if self.is_upload:
            return f"skyless plan {self.facts.name}"
        return f"skyless logs {self.facts.job_id}"

    def where(self) -> str:
        f = self.facts
        place = "/".join(p for p in (f.cloud, f.zone or f.region) if p)
        return f"{place} {f.instance_type or ''}".strip() if place or f.instance_type else "not placed"

    def spot(self) -> str:
        return "unknown" if self.facts.use_spot is None else ("spot" if self.facts.use_spot else "on-demand")

    def lines(self) -> list[tuple[str, str]]:
        f = self.facts
        if self.is_upload:
            return [("File", f.name or "-"), ("State", f.state), ("Report", f"{f.name}.error.json")]
        if self.is_team:
            return [*self.extra_lines, ("Logs", self.logs_command)]
        if self.is_test:
            return [("Sent by", "skyless notify test"), ("Topics", "the ones `skyless notify show` lists")]
        return [
            ("Job", f"{f.job_id} ({f.name})" if f.name else f.job_id),
            ("State", f.state),
            ("Where", self.where()),
            ("Spot", self.spot()),
            ("Cost so far", f"${f.cost:.4f}"),
            *self.extra_lines,
            ("Logs", self.logs_command),
        ]

    @property
    def hint(self) -> str:
        if self.is_upload:
            return f"Fix the file and upload it again; `{self.logs_command}` shows the same error."
        if self.is_team:
            return f"`{self.logs_command}` shows the team's budget and each member's spend."
        if self.is_test:
            return "No job is involved: this message only shows that skyless can reach you."
        return f"Logs: `{self.logs_command}`"

    def text(self) -> str:
        body = "\n".join(f"{label}: {value}" for label, value in self.lines() if label != "Logs")
        return f"{self.subject}\n\n{self.event_message}\n\n{body}\n\n{self.hint.replace('`', '')}\n"


def record_from_image(image: dict[str, Any]) -> TimelineRecord | None:
    """A stream record's NewImage (DynamoDB-typed) → the event; None when it is not a job event."""
    try:
        plain = plain_image(image)
    except (TypeError, ValueError):
        return None
    job_id, at = plain.get("job_id"), plain.get("at")
    if not isinstance(job_id, str) or not isinstance(at, str):
        return None
    if not (job_id.startswith("job-") or job_id.startswith(UPLOAD_PREFIX) or job_id.startswith(TEAM_PREFIX)):
        return None
    detail = plain.get("detail")
    return TimelineRecord(
        job_id=job_id,
        at=at,
        kind=str(plain.get("kind") or ""),
        state=plain.get("state") if isinstance(plain.get("state"), str) else None,
        message=str(plain.get("message") or ""),
        detail=detail if isinstance(detail, dict) else {},
    )


def needs_history(record: TimelineRecord) -> bool:
    """Whether `topic_of` must see the states before this event."""
    return record.kind == "state" and record.state in ("RUNNING", "WAITING")


def topic_of(record: TimelineRecord, earlier_states: Sequence[str] = ()) -> str | None:
    """The topic this event notifies, or None. `earlier_states`: the job's states before it, oldest first."""
    if record.kind == UPLOAD_REJECTED_KIND and record.job_id.startswith(UPLOAD_PREFIX):
        return "upload_rejected"
    if record.kind == BUDGET_KIND:
        return "budget"
    if record.kind == OVERRUN_KIND:
        return "overrun"
    if record.kind != "state":
        return None
    if record.state == "SUCCEEDED":
        return "succeeded"
    if record.state == "FAILED_NO_RESOURCE":
        return "no_capacity"
    if record.state in ("FAILED", "FAILED_SETUP"):
        return "no_capacity" if record.message.startswith(NO_CAPACITY_REASON) else "failed"
    if record.state == "RECOVERING":
        return "preempted"
    if record.state == "RUNNING":
        for state in reversed(earlier_states):
            if state == "RUNNING":
                return None
            if state == "RECOVERING":
                return "recovered"
        return None
    if record.state == "WAITING":
        for state in reversed(earlier_states):
            if state == "WAITING":
                return None
            if state == "PLANNED":
                return "no_capacity"
        return "no_capacity"
    return None


def compose(topic: str, record: TimelineRecord, facts: JobFacts) -> Notification:
    name = facts.name or facts.job_id
    subject = f"skyless: {name} {HEADLINES.get(topic, topic)}"
    if topic == "test":  # no job is involved: not "test test notification"
        subject = "skyless: test notification"
    return Notification(topic=topic, subject=subject, event_message=record.message, facts=facts)
