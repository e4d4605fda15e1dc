"""One launch of a job on one candidate, and what follows it, shared by the plan's walk
(shared/jobs/provisioning.py) and a deadline job's policy walk (shared/jobs/deadline_launch.py): the launch
request, the block a cloud error earns, the record of the cluster with the job's move to SETTING_UP, and the
outcomes short of a launch (a transient retry later, WAITING with backoff, FAILED)."""

from __future__ import annotations

import math
import time
from typing import Any

from shared.aws.queues import MAX_DELAY_SECONDS
from shared.clouds.base import LaunchSpec, Node, ranked
from shared.clouds.errors import CloudError, NoCapacityError
from shared.jobs.blocks import blocks_json
from shared.jobs.failover import MAX_TRIED_SHOWN, launched_message
from shared.jobs.job_groups import tell_group
from shared.jobs.job_storage import prepare_storage, release_storage
from shared.jobs.messages import cluster_id_for, send_launch
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import candidate_text, plan_fields
from shared.jobs.task_records import read_pipeline_of
from shared.jobs.tokens import agent_token, boot_token, token_hash
from shared.optimizer.plan import Block, Candidate, Plan
from shared.states import JobState, is_terminal
from shared.store.models import JobModel
from shared.task.container_image import image_id_for
from shared.wiring import Wiring


def wait_delay(rounds: int) -> int:
    """Backoff between WAITING rounds: 30 s, 60 s, 120 s ... capped at SQS's 900 s."""
    return min(MAX_DELAY_SECONDS, 30 * 2**rounds)


def transient_delay(retries: int) -> int:
    return min(MAX_DELAY_SECONDS, 5 * 2**retries)


def task_launch_fields(wiring: Wiring, job: JobModel, cloud: str | None = None) -> dict[str, Any]:
    """What the job's task says about the VM on `cloud` beyond its shape: image, disk, ports, labels."""
    return resource_launch_fields(read_pipeline_of(wiring, job).tasks[int(job.task_index)].resources, cloud)


def candidate_shape(candidate: Candidate) -> dict[str, Any]:
    """The LaunchSpec fields a plan's candidate decides: where, which machine, how many, spot or not."""
    return {
        "cloud": candidate.cloud,
        "region": candidate.region,
        "zone": candidate.zone,
        "instance_type": candidate.instance_type,
        "use_spot": candidate.use_spot,
        "num_nodes": candidate.num_nodes,
        "accelerator": candidate.accelerator,
        "accelerator_count": math.ceil(candidate.accelerator_count) if candidate.accelerator else 0,
        "reservation": candidate.reservation,
        "reservation_kind": candidate.reservation_kind,
    }


def resource_launch_fields(resources: Any, cloud: str | None) -> dict[str, Any]:
    """What a task's `resources` say about the VM on `cloud` beyond its shape: image, disk, ports, labels."""
    ports = resources.ports
    listed = [] if ports is None else ports if isinstance(ports, list) else [ports]
    disk = resources.disk_size_gib()
    return {
        "image_id": image_id_for(resources, cloud),
        "disk_size_gb": None if disk is None else int(disk),
        "ports": tuple(str(p) for p in listed),
        "labels": dict(resources.labels or {}),
    }


def launch_candidate(
    wiring: Wiring, job: JobModel, candidate: Candidate, attempt: int | None = None
) -> list[Node]:
    """Launch the cluster of the job's attempt (default: its current one; the next one, when the new
    capacity is made before the running attempt is let go) on `candidate`. Idempotent per attempt."""
    provider = wiring.providers.provider_for(candidate.cloud)
    prepare_storage(wiring, job, candidate.cloud)
    attempt = int(job.attempt) if attempt is None else attempt
    cluster_id = cluster_id_for(job.job_id, attempt)
    spec = LaunchSpec(
        job_id=job.job_id,
        cluster_id=cluster_id,
        attempt_id=cluster_id,
        attempt=attempt,
        **candidate_shape(candidate),
        agent_env={
            "SKYLESS_API_URL": wiring.settings.api_url or "",
            # user-data's only credential: one config fetch per node, within the boot window
            "SKYLESS_BOOT_TOKEN": boot_token(wiring.settings, job.job_id, attempt),
        },
        **task_launch_fields(wiring, job, candidate.cloud),
    )
    return provider.launch(spec)


def note_spot_refusal(wiring: Wiring, job: JobModel, candidate: Candidate, error: CloudError) -> None:
    """A spot launch refused for capacity is evidence about its zone for every job (cool-downs)."""
    if candidate.use_spot and isinstance(error, NoCapacityError):
        who = f"{job.job_id}-{int(job.attempt)}"
        wiring.cooldowns.refused(candidate.cloud, candidate.region, candidate.zone, who)


def record_launch(
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
    extra_detail: dict[str, Any] | None = None,
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
    detail: dict[str, Any] = {"instances": [n.instance_id for n in ordered], **(extra_detail or {})}
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


def retry_later(
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
    if keep_progress(wiring, job, changes, replanned, message):
        send_launch(wiring, job.job_id, int(job.attempt), delay_seconds=transient_delay(retries))
    return Outcome.RETRY_LATER


def keep_progress(
    wiring: Wiring, job: JobModel, changes: dict[str, Any], replanned: Plan | None, message: str
) -> bool:
    """Record the walk's progress: PLANNED -> PROVISIONING the first time, a progress write after."""
    if replanned is not None:
        changes = {**changes, **plan_fields(replanned)}
    if JobState(job.state) == JobState.PLANNED:
        return wiring.store.move(job, JobState.PROVISIONING, message, changes=changes)
    return wiring.store.save_progress(job, changes, message)


def wait_or_give_up(
    wiring: Wiring,
    job: JobModel,
    blocks: list[Block],
    tried: list[str],
    *,
    until: float | None = None,
    counted: bool = True,
    why: str = "no candidate had capacity",
) -> Outcome:
    """A first launch gives up after `max_wait_retries` counted rounds; a job recovering from a preemption
    waits for capacity without limit, as SkyPilot's managed-job recovery retries forever. The wait is the
    round's backoff, or `until` (epoch seconds: the launch message carries it, and it is the job's one
    pending launch, so a copy of an earlier wait's message is dropped); a round not `counted` (the job was
    refused nothing itself) neither gives up nor grows the backoff."""
    rounds = int(job.wait_rounds)
    if counted and rounds >= wiring.settings.max_wait_retries and not int(job.recoveries or 0):
        summary = "; ".join(tried[-5:])
        reason = f"no capacity anywhere after {rounds + 1} rounds ({summary})"
        return fail_provisioning(wiring, job, reason, JobState.FAILED_NO_RESOURCE)
    delay = wait_delay(rounds) if until is None else max(1, math.ceil(until - time.time()))
    changes = {"wait_rounds": rounds + int(counted), "candidate_index": 0, "blocklist": blocks_json(blocks)}
    if until is not None:
        changes["next_check_at"] = until
    message = f"{why}; retrying in {_span(delay)}"
    moved = wiring.store.move(job, JobState.WAITING, message, changes=changes, detail={"tried": tried[-10:]})
    if not moved:
        return Outcome.ALREADY_DONE
    body = {"job_id": job.job_id, "attempt": int(job.attempt), "action": "launch"}
    if until is not None:
        body["not_before"] = until  # sent on until due: SQS delays stop at 900 s
    wiring.queues.provision.send(body, delay_seconds=min(MAX_DELAY_SECONDS, delay))
    return Outcome.RETRY_LATER


def _span(seconds: int) -> str:
    return f"{seconds} s" if seconds < 600 else f"{seconds // 60} min"


def fail_provisioning(
    wiring: Wiring, job: JobModel, reason: str, ended: JobState = JobState.FAILED
) -> Outcome:
    """`ended`: FAILED_NO_RESOURCE when no candidate had capacity (SkyPilot's state for a launch that ran
    out of retries), else FAILED."""
    moved = wiring.store.move(job, ended, reason, changes={"reason": reason})
    if moved:
        release_storage(wiring, job)
        tell_group(wiring, job)
    return Outcome.DONE if moved else Outcome.ALREADY_DONE
