"""A job group through the real provision handler against moto: members recorded and launched once,
the group step idempotent under duplicated, late and reordered messages, the termination delay a delayed
SQS message, and a cancelled group cancelling its tasks."""

from __future__ import annotations

import json
from typing import Any

from functions.provision.handler import handler as provision_handler
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.job_groups import member_job_id, step_group, tell_group
from shared.jobs.outcomes import Outcome
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.wiring import wiring_for

S = JobState
GROUP = """\
name: rl
execution: parallel
primary_tasks: [trainer]
termination_delay: 30s
---
name: trainer
run: echo train
---
name: replay-buffer
run: python3 -m http.server 6379
"""


def move(settings: Settings, job_id: str, *states: JobState) -> None:
    """Move a member as the job steps do: the move, then (running or ended) a word to its group."""
    wiring = wiring_for(settings)
    for state in states:
        job = wiring.store.get(job_id)
        assert job is not None and wiring.store.move(job, state, f"test: {state}")
        if state in (S.RUNNING, S.SUCCEEDED, S.FAILED, S.CANCELLED):
            tell_group(wiring, job)


def state_events(settings: Settings, job_id: str, state: JobState) -> int:
    events = wiring_for(settings).store.timeline(job_id)
    return sum(1 for e in events if e.kind == "state" and e.state == state)


def group_steps(queues: Any) -> list[dict[str, Any]]:
    return [r for r in queues.receive("provision") if json.loads(r["body"])["action"] == "group_step"]


def submit(settings: Settings, job_id: str = "job-group000001") -> str:
    command = SubmitJob.from_text(owner="user-1", task_text=GROUP, filename="rl.yaml", job_id=job_id)
    return submit_job(wiring_for(settings), command).job_id


def test_submit_records_the_group_and_launches_each_task_once_even_when_submitted_twice(stack, queues):
    group_id = submit(stack)
    store = wiring_for(stack).store
    group = store.get(group_id)
    assert group is not None and group.state == S.PROVISIONING
    members = json.loads(group.group_tasks)
    assert members == [member_job_id(group_id, 0), member_job_id(group_id, 1)]
    for index, member_id in enumerate(members):
        member = store.get(member_id)
        assert member is not None and member.group_id == group_id and int(member.group_index) == index
        assert member.state == S.PLANNED
    launches = [json.loads(r["body"]) for r in queues.receive("provision")]
    assert sorted(b["job_id"] for b in launches if b["action"] == "launch") == members
    assert submit(stack) == group_id  # the same upload delivered again
    assert queues.receive("provision") == []


def test_a_launch_message_for_the_group_itself_launches_nothing(stack, queues):
    group_id = submit(stack)
    queues.receive("provision")
    body = json.dumps({"job_id": group_id, "attempt": 0, "action": "launch"})
    record = {"messageId": "m-1", "receiptHandle": "r-1", "body": body, "attributes": {},
              "messageAttributes": {}, "eventSource": "aws:sqs"}  # fmt: skip
    assert provision_handler({"Records": [record]}, None) == {"batchItemFailures": []}
    assert wiring_for(stack).store.cluster(f"{group_id}-0") is None


def test_duplicated_and_late_group_steps_stop_the_auxiliary_task_once_after_its_delay(stack, queues):
    group_id = submit(stack)
    trainer, buffer = member_job_id(group_id, 0), member_job_id(group_id, 1)
    queues.receive("provision")
    move(stack, buffer, S.SETTING_UP, S.RUNNING)
    move(stack, trainer, S.SETTING_UP, S.RUNNING)
    move(stack, trainer, S.SUCCEEDED)
    steps = group_steps(queues)  # running, running, succeeded: one step each
    # the real handler, each record twice in one batch: the duplicates change nothing
    assert provision_handler({"Records": steps + steps}, None) == {"batchItemFailures": []}
    store = wiring_for(stack).store
    group = store.get(group_id)
    assert group is not None and group.state == S.RUNNING and group.group_done_at is not None
    assert state_events(stack, group_id, S.RUNNING) == 1
    assert store.get(buffer).state == S.RUNNING  # the termination delay has not passed
    assert queues.delayed_count("provision") >= 1  # ... and a delayed step will come for it
    done_at = float(group.group_done_at)
    assert step_group(wiring_for(stack), group_id, now=done_at + 10) == Outcome.ALREADY_DONE
    # the delayed message, delivered twice (and late)
    assert step_group(wiring_for(stack), group_id, now=done_at + 31) == Outcome.DONE
    assert step_group(wiring_for(stack), group_id, now=done_at + 45) == Outcome.ALREADY_DONE
    stopped = store.get(buffer)
    assert stopped.state == S.CANCELLED and stopped.reason.startswith("stopped by the job group")
    assert state_events(stack, buffer, S.CANCELLED) == 1
    ended = store.get(group_id)
    assert ended.state == S.SUCCEEDED and ended.reason == "the job group's primary tasks succeeded"
    assert state_events(stack, group_id, S.SUCCEEDED) == 1
    teardowns = [json.loads(r["body"]) for r in queues.receive("provision")]
    assert [b["job_id"] for b in teardowns if b["action"] == "teardown"] == [buffer]


def test_a_member_message_arriving_after_the_group_ended_changes_nothing(stack, queues):
    group_id = submit(stack)
    trainer, buffer = member_job_id(group_id, 0), member_job_id(group_id, 1)
    move(stack, trainer, S.FAILED)  # reordered: the failure is decided before anything ran
    assert step_group(wiring_for(stack), group_id) == Outcome.DONE
    store = wiring_for(stack).store
    assert store.get(group_id).state == S.FAILED and store.get(buffer).state == S.CANCELLED
    assert store.get(group_id).reason == "task trainer of the job group failed"
    version = int(store.get(group_id).version)
    late = group_steps(queues)  # the trainer's own word to the group, delivered after the group ended
    assert late and provision_handler({"Records": late}, None) == {"batchItemFailures": []}
    assert step_group(wiring_for(stack), group_id) == Outcome.ALREADY_DONE
    assert int(store.get(group_id).version) == version


def test_cancelling_a_group_cancels_every_task_and_twice_is_harmless(stack, queues):
    group_id = submit(stack)
    cancel_job(wiring_for(stack), group_id, owner="user-1")
    cancel_job(wiring_for(stack), group_id, owner="user-1")
    store = wiring_for(stack).store
    assert store.get(group_id).state == S.CANCELLED
    for index in (0, 1):
        member = store.get(member_job_id(group_id, index))
        assert member.state == S.CANCELLED
        assert member.reason == "stopped by the job group: the group is CANCELLED"
        assert state_events(stack, member.job_id, S.CANCELLED) == 1
