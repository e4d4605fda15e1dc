"""Provision: fence the job's earlier attempts (shared/jobs/fencing.py), then walk the plan's candidates
from the job's current index until one launches; fail over on capacity, quota and credential errors, and
when the plan's list is used up, plan again with everything that failed blocked (shared/jobs/failover.py);
wait (a delayed message, never a sleep) only when nothing feasible is left.
Teardown: terminate a cluster by tag, on every configured provider, and mark its record.

A launch that works on the first candidate moves the job PLANNED -> SETTING_UP in one write; PROVISIONING
is written only when there is progress to keep (failed candidates, a retry later)."""

from __future__ import annotations

from typing import Any

from shared.clouds.errors import CloudError, InvalidLaunchError, TransientCloudError
from shared.errors import NoOfferingError
from shared.jobs.blocks import block_for, blocks_json, blocks_of, is_blocked, sticky, zone_block
from shared.jobs.costs import end_cluster
from shared.jobs.deadline_launch import check_deadline, defer_if_early, launch_by_policy, superseded_wait
from shared.jobs.failover import compact_blocks, note_refusal, replan_after_failures, tried_text
from shared.jobs.fencing import FENCE_RETRY_SECONDS, FenceReport, fence_earlier_attempts
from shared.jobs.job_groups import step_group
from shared.jobs.job_storage import release_storage
from shared.jobs.launching import (
    fail_provisioning,
    keep_progress,
    launch_candidate,
    note_spot_refusal,
    record_launch,
    retry_later,
)
from shared.jobs.messages import ProvisionMessage, cluster_id_for, send_launch
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import candidate_text, make_plan, plan_fields, plan_of
from shared.jobs.spot_gate import SpotGate, wait_for_capacity
from shared.jobs.task_records import refused_stored_task
from shared.optimizer.plan import Block, Plan
from shared.states import JobState, is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring, current_wiring

MAX_LAUNCHES_PER_STEP = 40  # launch requests one invocation makes before it hands on to a new message
LAUNCHABLE = (JobState.PLANNED, JobState.WAITING, JobState.PROVISIONING)


def provision_job(body: dict[str, Any], wiring: Wiring | None = None) -> Outcome:
    wiring = wiring or current_wiring()
    message = ProvisionMessage.from_body(body)
    if message.action == "deadline_check":
        return check_deadline(wiring, message)
    if message.action == "group_step":
        return step_group(wiring, message.job_id)
    if defer_if_early(wiring, message):
        return Outcome.RETRY_LATER
    if message.action == "teardown":
        cluster_id = message.cluster_id or cluster_id_for(message.job_id, message.attempt)
        return teardown_cluster(wiring, message.job_id, cluster_id)
    job = wiring.store.get(message.job_id)
    if job is None:
        return Outcome.UNKNOWN_JOB
    if message.attempt != job.attempt:
        return Outcome.STALE
    return launch_read_job(wiring, job, message)


def launch_read_job(wiring: Wiring, job: JobModel, message: ProvisionMessage) -> Outcome:
    """Launch `job` as read, or as a move of this call left it (every write that follows is conditional on
    the state and version in hand)."""
    if JobState(job.state) not in LAUNCHABLE or job.group_tasks:  # a job group launches only its members
        return Outcome.ALREADY_DONE
    if superseded_wait(job, message):
        return Outcome.STALE
    refused = refused_stored_task(wiring, job)
    if refused is not None:
        return fail_provisioning(wiring, job, refused)
    fence = fence_earlier_attempts(wiring, job)
    if not fence.fenced:
        return _wait_for_fence(wiring, job, fence)
    attempt = int(job.attempt)
    if JobState(job.state) == JobState.WAITING:
        outcome = _retry_after_waiting(wiring, job)
    else:
        outcome = _walk_candidates(wiring, job)
    fence.write_down(wiring, job.job_id, attempt)
    return outcome


def _wait_for_fence(wiring: Wiring, job: JobModel, fence: FenceReport) -> Outcome:
    """An earlier cluster is still listed as running (or a cloud could not be asked): no launch yet."""
    what = ", ".join(fence.still_running) or "clusters on " + ", ".join(fence.unreachable)
    message = f"waiting for {what} to be gone before attempt {int(job.attempt)} launches"
    wiring.store.note(job.job_id, "fence", message)
    send_launch(wiring, job.job_id, int(job.attempt), delay_seconds=FENCE_RETRY_SECONDS)
    return Outcome.RETRY_LATER


def _retry_after_waiting(wiring: Wiring, job: JobModel) -> Outcome:
    """A WAITING round is over: plan afresh (prices, cool-downs and capacity may have changed) with only
    the sticky blocks kept, and walk the new list."""
    kept = sticky(blocks_of(job))
    try:
        plan = make_plan(wiring, job, kept, fallback=False)
    except NoOfferingError as error:
        return fail_provisioning(wiring, job, f"no plan: {error}")
    changes = {**plan_fields(plan), "candidate_index": 0, "blocklist": blocks_json(kept)}
    if not wiring.store.move(job, JobState.PROVISIONING, "retrying every place, re-planned", changes=changes):
        return Outcome.ALREADY_DONE
    return _walk_candidates(wiring, job)


def _walk_candidates(wiring: Wiring, job: JobModel) -> Outcome:
    if job.deadline_at:
        return launch_by_policy(wiring, job)
    plan = plan_of(job)
    if plan is None:
        return fail_provisioning(wiring, job, "no plan to provision")
    blocks = blocks_of(job)
    gate = SpotGate.of(wiring, job.job_id, int(job.attempt))  # spot only where the shared evidence allows
    tried: list[str] = []
    index = int(job.candidate_index)
    replanned: Plan | None = None  # a plan made in this step, stored with the step's outcome
    launches = 0
    while True:
        candidates = plan.tasks[int(job.task_index)].candidates
        while index < len(candidates):
            candidate = candidates[index]
            if is_blocked(candidate, blocks):
                index += 1
                continue
            held = gate.hold(candidate)
            if held is not None:
                blocks.append(held)
                index += 1
                continue
            if launches >= MAX_LAUNCHES_PER_STEP:
                return _continue_later(wiring, job, index, gate.stored(blocks), replanned)
            launches += 1
            try:
                nodes = launch_candidate(wiring, job, candidate)
            except TransientCloudError as error:
                note_refusal(wiring, job, candidate, "transient", error.message)
                gate.failed(candidate, error)
                if int(job.transient_retries) < wiring.settings.max_transient_retries:
                    return retry_later(wiring, job, index, gate.stored(blocks), error, replanned)
                blocks.append(zone_block(candidate, f"transient: {error.message}"))
                tried.append(tried_text(candidate, error.message))
            except InvalidLaunchError as error:
                return fail_provisioning(wiring, job, f"{candidate_text(candidate)}: {error.message}")
            except CloudError as error:
                note_spot_refusal(wiring, job, candidate, error)
                gate.failed(candidate, error)
                block = block_for(candidate, error)
                note_refusal(wiring, job, candidate, block.reason.split(":", 1)[0], error.message)
                blocks.append(block)
                tried.append(tried_text(candidate, error.message))
            else:
                stored = gate.stored(blocks)
                return record_launch(wiring, job, candidate, index, stored, nodes, tried, replanned)
            index += 1
        blocks = compact_blocks(gate.stored(blocks), wiring.catalog) + list(gate.held)
        answer = replan_after_failures(wiring, job, blocks)
        if answer is None:
            return wait_for_capacity(wiring, job, gate.stored(blocks), tried, gate)
        replanned, blocks = answer
        plan, index = replanned, 0


def _continue_later(
    wiring: Wiring, job: JobModel, index: int, blocks: list[Block], replanned: Plan | None
) -> Outcome:
    """This step made MAX_LAUNCHES_PER_STEP launch requests: keep the progress, go on in a new message."""
    changes = {"candidate_index": index, "blocklist": blocks_json(blocks)}
    message = f"{MAX_LAUNCHES_PER_STEP} places tried; trying more"
    if keep_progress(wiring, job, changes, replanned, message):
        send_launch(wiring, job.job_id, int(job.attempt))
    return Outcome.RETRY_LATER


def teardown_cluster(wiring: Wiring, job_id: str, cluster_id: str) -> Outcome:
    """Terminate by tag: on the recorded provider, or on every usable one when the launch was never
    recorded (a cancel that raced it). Then mark the record."""
    cluster = wiring.store.cluster(cluster_id)
    if cluster is not None:
        providers = [wiring.providers.build(cluster.provider)]
    else:
        providers = wiring.providers.usable_providers()
    for provider in providers:
        provider.terminate(cluster_id)
    job = wiring.store.get(job_id)
    if job is not None and is_terminal(job.state):
        release_storage(wiring, job)  # after the nodes are gone: their last write-back has landed
    if cluster is not None and end_cluster(wiring, cluster, job.owner if job is not None else None):
        job = wiring.store.get(job_id)
        if job is None or job.cluster_id != cluster_id:
            wiring.store.note(job_id, "teardown", f"cluster {cluster_id} terminated")
        # else: the job's own (last) cluster, whose record says when it ended; views show that as the event
        return Outcome.DONE
    return Outcome.ALREADY_DONE
