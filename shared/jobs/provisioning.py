"""Provision: fence the job's earlier attempts (shared/jobs/fencing.py), then walk the plan's candidates
from the job's current index until one launches; fail over on capacity, quota and credential errors, and
when the plan's list is used up, plan again with everything that failed blocked (shared/jobs/failover.py);
wait (a delayed message, never a sleep) only when nothing feasible is left.
Teardown: terminate a cluster by tag, on every configured provider, and mark its record.

A launch that works on the first candidate moves the job PLANNED -> SETTING_UP in one write; PROVISIONING
is written only when there is progress to keep (failed candidates, a retry later)."""

from __future__ import annotations

import math
import time
from typing import Any

from shared.clouds.base import LaunchSpec, Node, ranked
from shared.clouds.errors import CloudError, InvalidLaunchError, TransientCloudError
from shared.errors import NoOfferingError
from shared.jobs.blocks import block_for as _block_for  # deadline_launch asks for it here
from shared.jobs.blocks import (
    blocks_json,
    blocks_of,
    is_blocked,
    sticky,
    zone_block,
)
from shared.jobs.deadline_launch import check_deadline, defer_if_early, launch_by_policy
from shared.jobs.failover import (
    MAX_TRIED_SHOWN,
    compact_blocks,
    launched_message,
    replan_after_failures,
    tried_text,
)
from shared.jobs.fencing import FENCE_RETRY_SECONDS, FenceReport, fence_earlier_attempts
from shared.jobs.job_groups import step_group, tell_group
from shared.jobs.job_storage import prepare_storage, release_storage
from shared.jobs.messages import ProvisionMessage, cluster_id_for, parse_message, send_launch
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import candidate_text, make_plan, plan_fields, plan_of
from shared.jobs.task_records import load_pipeline_of
from shared.jobs.tokens import agent_token, boot_token, token_hash
from shared.optimizer.plan import Block, Candidate, Plan
from shared.states import JobState, is_terminal
from shared.store.models import JobModel
from shared.task.container_image import image_id_for
from shared.wiring import Wiring, current_wiring

MAX_DELAY_SECONDS = 900
MAX_LAUNCHES_PER_STEP = 40  # launch requests one invocation makes before it hands on to a new message
LAUNCHABLE = (JobState.PLANNED, JobState.WAITING, JobState.PROVISIONING)


def wait_delay(rounds: int) -> int:
    """Backoff between WAITING rounds: 30 s, 60 s, 120 s ... capped at SQS's 900 s."""
    return min(MAX_DELAY_SECONDS, 30 * 2**rounds)


def transient_delay(retries: int) -> int:
    return min(MAX_DELAY_SECONDS, 5 * 2**retries)


def provision_job(body: dict[str, Any], wiring: Wiring | None = None) -> Outcome:
    wiring = wiring or current_wiring()
    message = parse_message(ProvisionMessage, body)
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
    if JobState(job.state) not in LAUNCHABLE or job.group_tasks:  # a job group launches only its members
        return Outcome.ALREADY_DONE
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
        return _fail(wiring, job, f"no plan: {error}")
    changes = {**plan_fields(plan), "candidate_index": 0, "blocklist": blocks_json(kept)}
    if not wiring.store.move(job, JobState.PROVISIONING, "retrying every place, re-planned", changes=changes):
        return Outcome.ALREADY_DONE
    return _walk_candidates(wiring, job)


def _walk_candidates(wiring: Wiring, job: JobModel) -> Outcome:
    if job.deadline_at:
        return launch_by_policy(wiring, job)
    plan = plan_of(job)
    if plan is None:
        return _fail(wiring, job, "no plan to provision")
    blocks = blocks_of(job)
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
            if launches >= MAX_LAUNCHES_PER_STEP:
                return _continue_later(wiring, job, index, blocks, replanned)
            launches += 1
            try:
                nodes = _launch(wiring, job, candidate)
            except TransientCloudError as error:
                if int(job.transient_retries) < wiring.settings.max_transient_retries:
                    return _retry_later(wiring, job, index, blocks, error, replanned)
                blocks.append(zone_block(candidate, f"transient: {error.message}"))
                tried.append(tried_text(candidate, error.message))
            except InvalidLaunchError as error:
                return _fail(wiring, job, f"{candidate_text(candidate)}: {error.message}")
            except CloudError as error:
                blocks.append(_block_for(candidate, error))
                tried.append(tried_text(candidate, error.message))
            else:
                return _record_launch(wiring, job, candidate, index, blocks, nodes, tried, replanned)
            index += 1
        blocks = compact_blocks(blocks, wiring.catalog)
        replanned = replan_after_failures(wiring, job, blocks)
        if replanned is None:
            return _wait_or_give_up(wiring, job, blocks, tried)
        plan, index = replanned, 0


def task_launch_fields(wiring: Wiring, job: JobModel, cloud: str | None = None) -> dict[str, Any]:
    """What the task's resources say about the VM on `cloud` beyond its shape: image, disk, ports, labels."""
    resources = load_pipeline_of(wiring, job).tasks[int(job.task_index)].resources
    ports = resources.ports
    listed = [] if ports is None else ports if isinstance(ports, list) else [ports]
    disk = resources.disk_size_gib()
    return {
        "image_id": image_id_for(resources, cloud),
        "disk_size_gb": None if disk is None else int(disk),
        "ports": tuple(str(p) for p in listed),
        "labels": dict(resources.labels or {}),
    }


def _launch(wiring: Wiring, job: JobModel, candidate: Candidate) -> list[Node]:
    provider = wiring.providers.provider_for(candidate.cloud)
    prepare_storage(wiring, job, candidate.cloud)
    cluster_id = cluster_id_for(job.job_id, int(job.attempt))
    spec = LaunchSpec(
        job_id=job.job_id,
        cluster_id=cluster_id,
        attempt_id=cluster_id,
        attempt=int(job.attempt),
        cloud=candidate.cloud,
        region=candidate.region,
        zone=candidate.zone,
        instance_type=candidate.instance_type,
        use_spot=candidate.use_spot,
        num_nodes=candidate.num_nodes,
        accelerator=candidate.accelerator,
        accelerator_count=math.ceil(candidate.accelerator_count) if candidate.accelerator else 0,
        agent_env={
            "SKYLESS_API_URL": wiring.settings.api_url or "",
            # user-data's only credential: one config fetch per node, within the boot window
            "SKYLESS_BOOT_TOKEN": boot_token(wiring.settings, job.job_id, int(job.attempt)),
        },
        **task_launch_fields(wiring, job, candidate.cloud),
    )
    return provider.launch(spec)


def _record_launch(
    wiring: Wiring,
    job: JobModel,
    candidate: Candidate,
    index: int,
    blocks: list[Block],
    nodes: list[Node],
    tried: list[str] = [],  # noqa: B006 - read only
    replanned: Plan | None = None,
    *,
    extra_changes: dict[str, Any] | None = None,
) -> Outcome:
    store = wiring.store
    cluster_id = cluster_id_for(job.job_id, int(job.attempt))
    now = time.time()
    ordered = ranked(nodes)
    cluster = store.new_cluster(
        cluster_id=cluster_id,
        job_id=job.job_id,
        attempt=int(job.attempt),
        provider=wiring.providers.provider_for(candidate.cloud).name,
        cloud=candidate.cloud,
        region=candidate.region,
        zone=candidate.zone,
        instance_type=candidate.instance_type,
        use_spot=candidate.use_spot,
        hourly_price=candidate.hourly_price,
        num_nodes=len(ordered),
        state="UP",
        nodes={
            node.instance_id: {"rank": rank, "ip": node.ip, "phase": "launched", "heartbeat_at": now}
            for rank, node in enumerate(ordered)
        },
        launched_at=now,
    )
    refs = [store.new_node_ref(n.instance_id, job.job_id, cluster_id, rank) for rank, n in enumerate(ordered)]
    changes = {
        "cluster_id": cluster_id,
        "candidate_index": index,
        "blocklist": blocks_json(blocks),
        "token_hash": token_hash(agent_token(wiring.settings, job.job_id, int(job.attempt))),
    }
    if replanned is not None:
        changes.update(plan_fields(replanned))
    detail: dict[str, Any] = {"instances": [n.instance_id for n in ordered]}
    if tried:
        detail["tried"] = tried[-MAX_TRIED_SHOWN:]
    moved = store.move(
        job,
        JobState.SETTING_UP,
        launched_message(len(ordered), candidate_text(candidate), tried),
        changes={**changes, **(extra_changes or {})},
        detail=detail,
        also_save=[cluster, *refs],
    )
    if moved:
        return Outcome.DONE
    latest = store.get(job.job_id)
    if latest is not None and latest.cluster_id == cluster_id and not is_terminal(latest.state):
        return Outcome.ALREADY_DONE  # a concurrent delivery of the same launch recorded it
    # Cancelled (or moved on) while we launched: what we launched must not outlive the job.
    wiring.providers.provider_for(candidate.cloud).terminate(cluster_id)
    return Outcome.ALREADY_DONE


def _retry_later(
    wiring: Wiring,
    job: JobModel,
    index: int,
    blocks: list[Block],
    error: CloudError,
    replanned: Plan | None = None,
) -> Outcome:
    retries = int(job.transient_retries)
    changes = {"candidate_index": index, "blocklist": blocks_json(blocks), "transient_retries": retries + 1}
    message = f"transient cloud error, retrying in {transient_delay(retries)} s: {error.message}"
    if _keep_progress(wiring, job, changes, replanned, message):
        send_launch(wiring, job.job_id, int(job.attempt), delay_seconds=transient_delay(retries))
    return Outcome.RETRY_LATER


def _continue_later(
    wiring: Wiring, job: JobModel, index: int, blocks: list[Block], replanned: Plan | None
) -> Outcome:
    """This step made MAX_LAUNCHES_PER_STEP launch requests: keep the progress, go on in a new message."""
    changes = {"candidate_index": index, "blocklist": blocks_json(blocks)}
    message = f"{MAX_LAUNCHES_PER_STEP} places tried; trying more"
    if _keep_progress(wiring, job, changes, replanned, message):
        send_launch(wiring, job.job_id, int(job.attempt))
    return Outcome.RETRY_LATER


def _keep_progress(
    wiring: Wiring, job: JobModel, changes: dict[str, Any], replanned: Plan | None, message: str
) -> bool:
    """Record the walk's progress: PLANNED -> PROVISIONING the first time, a progress write after."""
    if replanned is not None:
        changes = {**changes, **plan_fields(replanned)}
    if JobState(job.state) == JobState.PLANNED:
        return wiring.store.move(job, JobState.PROVISIONING, message, changes=changes)
    return wiring.store.save_progress(job, changes, message)


def _wait_or_give_up(wiring: Wiring, job: JobModel, blocks: list[Block], tried: list[str]) -> Outcome:
    rounds = int(job.wait_rounds)
    if rounds >= wiring.settings.max_wait_retries:
        summary = "; ".join(tried[-5:])
        return _fail(wiring, job, f"no capacity anywhere after {rounds + 1} rounds ({summary})")
    delay = wait_delay(rounds)
    moved = wiring.store.move(
        job,
        JobState.WAITING,
        f"no candidate had capacity; retrying in {delay} s",
        changes={"wait_rounds": rounds + 1, "candidate_index": 0, "blocklist": blocks_json(blocks)},
        detail={"tried": tried[-10:]},
    )
    if not moved:
        return Outcome.ALREADY_DONE
    send_launch(wiring, job.job_id, int(job.attempt), delay_seconds=delay)
    return Outcome.RETRY_LATER


def _fail(wiring: Wiring, job: JobModel, reason: str) -> Outcome:
    moved = wiring.store.move(job, JobState.FAILED, reason, changes={"reason": reason})
    if moved:
        release_storage(wiring, job)
        tell_group(wiring, job)
    return Outcome.DONE if moved else Outcome.ALREADY_DONE


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
    if cluster is not None and wiring.store.mark_cluster_terminated(cluster):
        job = wiring.store.get(job_id)
        if job is None or job.cluster_id != cluster_id:
            wiring.store.note(job_id, "teardown", f"cluster {cluster_id} terminated")
        # else: the job's own (last) cluster, whose record says when it ended; views show that as the event
        return Outcome.DONE
    return Outcome.ALREADY_DONE
