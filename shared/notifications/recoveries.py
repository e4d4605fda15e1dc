"""What a move to RECOVERING was, read from its event's detail, and what the notification says. Pure: no I/O.

RECOVERING is where a job goes for three different things, told apart as SkyPilot's managed jobs tell them
(sky/jobs/controller.py: "User program crashed ... Retry the job as max_restarts_on_errors is set to N [k/N]"
for the task's own failure; a preemption or a lost cluster is a recovery):
- a preemption (detail `preempted`): topic `preempted`, "was preempted; recovering";
- the task's own failure, restarted under `max_restarts_on_errors` or `recover_on_exit_codes` (detail
  `task_failed`, written by shared/jobs/agent_reports.py with the exit code and the restart count): topic
  `restarting`, gated by the owner's `failed` topic: it is a failure of their code, which a user who only
  wants failures must hear of, and which a user who turned failures off said they do not want;
- a node lost without a preemption (detail `preempted` false, not a restart: gone or silent at boot, or an
  on-demand node the cloud lists as terminated): topic `node_lost`, gated by `preempted` (the owner's
  "my capacity went away and skyless is getting it back" news).
- a deadline job's check answered by a wait (detail `policy_wait`, shared/jobs/deadline_launch.py: the
  policy let its cluster go to wait for spot): topic `policy_wait`, "was stopped by its deadline policy;
  waiting", gated by `preempted` as before, since the RUNNING after it still tells `recovered`.
The RUNNING that ends RECOVERINGs which were all task-failure restarts is `restarted` (gated by `recovered`).
An event written before these fields existed keeps the wording of a preemption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.notifications.events import JobFacts, Notification, TimelineRecord

RESTARTING = "restarting"
NODE_LOST = "node_lost"
RESTARTED = "restarted"
POLICY_WAIT = "policy_wait"  # in a RECOVERING event's detail, and the topic telling it
GATES = {RESTARTING: "failed", NODE_LOST: "preempted", RESTARTED: "recovered", POLICY_WAIT: "preempted"}
TASK_FAILED = "task_failed"  # in a RECOVERING event's detail: the task failed and is restarted


def is_task_restart(detail: Mapping[str, Any]) -> bool:
    return bool(detail.get(TASK_FAILED))


def recovering_topic(record: TimelineRecord) -> str:
    """The topic of a RECOVERING event (not a planned move)."""
    detail = record.detail
    if is_task_restart(detail):
        return RESTARTING
    if detail.get(POLICY_WAIT):
        return POLICY_WAIT
    if detail.get("preempted") is False and detail.get("restart") is False:
        return NODE_LOST
    return "preempted"


def running_topic(earlier: Sequence[TimelineRecord]) -> str:
    """The topic of a RUNNING after a RECOVERING: `restarted` when every RECOVERING since the last RUNNING
    was the task's own failure restarted. `earlier`: the job's state events before it, oldest first."""
    seen = False
    for event in reversed(earlier):
        if event.state == "RUNNING":
            break
        if event.state == "RECOVERING":
            if not is_task_restart(event.detail):
                return "recovered"
            seen = True
    return RESTARTED if seen else "recovered"


def _number(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def restart_headline(detail: Mapping[str, Any]) -> str:
    """ "failed with exit code 3; restarting (restart 1 of 2)" """
    code = _number(detail.get("exit_code"))
    failed = "failed in setup" if detail.get("setup_failed") else "failed"
    if code is not None:
        failed += f" with exit code {code}"
    if detail.get("exit_code_listed"):
        return f"{failed}; restarting (exit code listed in recover_on_exit_codes)"
    number, allowed = _number(detail.get("restart_number")), _number(detail.get("max_restarts"))
    if number is None:
        return f"{failed}; restarting"
    of = f" of {allowed}" if allowed is not None else ""
    return f"{failed}; restarting (restart {number}{of})"


def restart_lines(detail: Mapping[str, Any]) -> list[tuple[str, str]]:
    if detail.get("exit_code_listed"):
        return [("Restarts", "not counted: its exit code is in recover_on_exit_codes")]
    number, allowed = _number(detail.get("restart_number")), _number(detail.get("max_restarts"))
    if number is None or allowed is None:
        return []
    return [("Restarts", f"{number} of {allowed} (max_restarts_on_errors); {allowed - number} left")]


def compose_restart(record: TimelineRecord, facts: JobFacts) -> Notification:
    name = facts.name or facts.job_id
    return Notification(
        topic=RESTARTING,
        subject=f"skyless: {name} {restart_headline(record.detail)}",
        event_message=record.message,
        facts=facts,
        extra_lines=tuple(restart_lines(record.detail)),
    )
