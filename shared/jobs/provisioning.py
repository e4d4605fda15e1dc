"""Provision: walk the plan's candidates from the job's current index until one launches; fail over on
capacity, quota and credential errors; wait (a delayed message, never a sleep) when nothing has room.
Teardown: terminate a cluster by tag, on every configured provider, and mark its record."""

from __future__ import annotations

import math
import time
from typing import Any

from shared.clouds.base import LaunchSpec, Node, ranked
from shared.clouds.errors import (
    CloudAuthError,
    CloudError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.jobs.blocks import (
    blocks_json,
    blocks_of,
    cloud_block,
    family_block,
    is_blocked,
    sticky,
    zone_block,
)
from shared.jobs.job_storage import prepare_storage, release_storage
from shared.jobs.messages import ProvisionMessage, cluster_id_for, parse_message, send_launch
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import candidate_text, plan_of
from shared.jobs.task_records import load_pipeline_of
from shared.jobs.tokens import agent_token, boot_token, token_hash
from shared.optimizer.plan import Block, Candidate
from shared.states import JobState, is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring, current_wiring

MAX_DELAY_SECONDS = 900


def wait_delay(rounds: int) -> int:
    """Backoff between WAITING rounds: 30 s, 60 s, 120 s ... capped at SQS's 900 s."""
    return min(MAX_DELAY_SECONDS, 30 * 2**rounds)


def transient_delay(retries: int) -> int:
    return min(MAX_DELAY_SECONDS, 5 * 2**retries)


def provision_job(body: dict[str, Any], wiring: Wiring | None = None) -> Outcome:
    wiring = wiring or current_wiring()
    message = parse_message(ProvisionMessage, body)
    if message.action == "teardown":
        cluster_id = message.cluster_id or cluster_id_for(message.job_id, message.attempt)
        return teardown_cluster(wiring, message.job_id, cluster_id)
    job = wiring.store.get(message.job_id)
    if job is None:
        return Outcome.UNKNOWN_JOB
    if message.attempt != job.attempt:
        return Outcome.STALE
    if not _start_provisioning(wiring, job):
        return Outcome.ALREADY_DONE
    return _walk_candidates(wiring, job)


def _start_provisioning(wiring: Wiring, job: JobModel) -> bool:
    """PLANNED/WAITING -> PROVISIONING (with this attempt's agent token hash); True to go on launching."""
    state = JobState(job.state)
    if state == JobState.PROVISIONING:
        return True  # a retry (delayed message) or a redelivery: launches are idempotent
    token = token_hash(agent_token(wiring.settings, job.job_id, int(job.attempt)))
    if state == JobState.PLANNED:
        return wiring.store.move(job, JobState.PROVISIONING, "provisioning", changes={"token_hash": token})
    if state == JobState.WAITING:
        kept = blocks_json(sticky(blocks_of(job)))
        changes = {"token_hash": token, "candidate_index": 0, "blocklist": kept}
        return wiring.store.move(job, JobState.PROVISIONING, "retrying every candidate", changes=changes)
    return False


def _walk_candidates(wiring: Wiring, job: JobModel) -> Outcome:
    plan = plan_of(job)
    if plan is None:
        return _fail(wiring, job, "no plan to provision")
    candidates = plan.tasks[int(job.task_index)].candidates
    blocks = blocks_of(job)
    tried: list[str] = []
    index = int(job.candidate_index)
    while index < len(candidates):
        candidate = candidates[index]
        if is_blocked(candidate, blocks):
            index += 1
            continue
        try:
            nodes = _launch(wiring, job, candidate)
        except TransientCloudError as error:
            if int(job.transient_retries) < wiring.settings.max_transient_retries:
                return _retry_later(wiring, job, index, blocks, error)
            blocks.append(zone_block(candidate, f"transient: {error.message}"))
        except InvalidLaunchError as error:
            return _fail(wiring, job, f"{candidate_text(candidate)}: {error.message}")
        except CloudError as error:
            blocks.append(_block_for(candidate, error))
            tried.append(f"{candidate.place} {candidate.instance_type}: {error.message}")
        else:
            return _record_launch(wiring, job, candidate, index, blocks, nodes)
        index += 1
    return _wait_or_give_up(wiring, job, blocks, tried)


def task_launch_fields(wiring: Wiring, job: JobModel) -> dict[str, Any]:
    """What the task's resources say about the VM beyond its shape: image, disk, ports, labels."""
    resources = load_pipeline_of(wiring, job).tasks[int(job.task_index)].resources
    ports = resources.ports
    listed = [] if ports is None else ports if isinstance(ports, list) else [ports]
    disk = resources.disk_size_gib()
    return {
        "image_id": resources.image_id,
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
        **task_launch_fields(wiring, job),
    )
    return provider.launch(spec)


def _block_for(candidate: Candidate, error: CloudError) -> Block:
    if isinstance(error, QuotaError):
        return family_block(candidate, f"quota: {error.message}")
    if isinstance(error, CloudAuthError):
        return cloud_block(candidate, f"auth: {error.message}")
    assert isinstance(error, NoCapacityError), error
    return zone_block(candidate, f"no capacity: {error.message}")


def _record_launch(
    wiring: Wiring, job: JobModel, candidate: Candidate, index: int, blocks: list[Block], nodes: list[Node]
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
    moved = store.move(
        job,
        JobState.SETTING_UP,
        f"launched {len(ordered)} node(s) on {candidate_text(candidate)}",
        changes={"cluster_id": cluster_id, "candidate_index": index, "blocklist": blocks_json(blocks)},
        detail={"instances": [n.instance_id for n in ordered]},
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
    wiring: Wiring, job: JobModel, index: int, blocks: list[Block], error: CloudError
) -> Outcome:
    retries = int(job.transient_retries)
    saved = wiring.store.save_progress(
        job,
        {"candidate_index": index, "blocklist": blocks_json(blocks), "transient_retries": retries + 1},
        f"transient cloud error, retrying in {transient_delay(retries)} s: {error.message}",
    )
    if saved:
        send_launch(wiring, job.job_id, int(job.attempt), delay_seconds=transient_delay(retries))
    return Outcome.RETRY_LATER


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
        wiring.store.note(job_id, "teardown", f"cluster {cluster_id} terminated")
        return Outcome.DONE
    return Outcome.ALREADY_DONE
