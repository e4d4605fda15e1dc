"""Recovery: a node of a live job was preempted, died, or went silent. Block per the job's recovery
strategy, tear the old cluster down, and re-plan with attempt + 1.

What bounds it, as SkyPilot's managed jobs: preemptions and lost nodes are recovered without limit;
`max_restarts_on_errors` bounds restarts for the task's own failures (shared/jobs/agent_reports.py), and an
exit code in `recover_on_exit_codes` restarts without being counted. One guard of our own: a crash loop.
An attempt lost before its task started, for a cause that is not a preemption (a node that dies or stays
silent at boot every time), counts one in `lost_in_a_row`; a preemption leaves the count as it is, an
attempt whose task started resets it. Past `SKYLESS_CRASH_LOOP_LIMIT` in a row the job fails, and the
timeline says why."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from shared.jobs.blocks import blocks_json, blocks_of
from shared.jobs.costs import cost_with
from shared.jobs.deadlines import cluster_ended
from shared.jobs.job_groups import tell_group
from shared.jobs.messages import cluster_id_for, send_optimize, send_teardown
from shared.jobs.nodes import nodes_of, task_running_on
from shared.jobs.outcomes import Outcome
from shared.jobs.task_records import read_pipeline_of
from shared.jobs.tokens import attempt_fields
from shared.optimizer.plan import Block
from shared.states import JobState, can_move
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring

log = logging.getLogger(__name__)

EAGER_NEXT_REGION = "EAGER_NEXT_REGION"
FAILOVER = "FAILOVER"
STARTED_PHASES = ("running", "succeeded", "failed", "setup_failed")  # the node got past boot
PREEMPTED = "preempted"  # the reason of the block a preemption writes


def recovery_options(wiring: Wiring, job: JobModel) -> dict[str, Any]:
    """The task's `job_recovery`: strategy, max_restarts_on_errors, recover_on_exit_codes."""
    return recovery_options_of(read_pipeline_of(wiring, job).tasks[int(job.task_index)])


def recovery_options_of(task: Any) -> dict[str, Any]:
    raw = task.resources.job_recovery
    if raw is None:
        return {"strategy": EAGER_NEXT_REGION, "max_restarts_on_errors": 0, "recover_on_exit_codes": []}
    if isinstance(raw, str):
        return {"strategy": raw.upper(), "max_restarts_on_errors": 0, "recover_on_exit_codes": []}
    codes = raw.recover_on_exit_codes
    codes_list = [] if codes is None else [codes] if isinstance(codes, int) else list(codes)
    return {
        "strategy": (raw.strategy or EAGER_NEXT_REGION).upper(),
        "max_restarts_on_errors": raw.max_restarts_on_errors or 0,
        "recover_on_exit_codes": [int(c) for c in codes_list],
    }


def recover_job(
    wiring: Wiring,
    job: JobModel,
    cause: str,
    *,
    preempted: bool,
    counts_as_restart: bool = False,
    spends_a_restart: bool = True,
    replan_delay_seconds: int = 0,
    warned: bool = False,
    then: Callable[[JobModel], object] | None = None,
    extra_detail: Mapping[str, Any] | None = None,
) -> Outcome:
    """Move the job to RECOVERING (attempt + 1), tear its cluster down, ask for a new plan. A caller that
    goes on to re-plan itself (shared/jobs/continuation.py) delays the optimize message: it is then only
    the fallback, and does not race the caller. `then`: that going on, called with the job as the move
    left it; the old cluster's teardown message waits until it returns (or raises), so the teardown does
    not compete with the replacement's launch request (the launch's fence terminates the old cluster
    first anyway). `warned`: the preemption came with a notice (the provider scorecard counts those,
    shared/reports/). `spends_a_restart`: False for a restart that max_restarts_on_errors does not count (an
    exit code in recover_on_exit_codes, as SkyPilot's `should_restart_on_failure`). `extra_detail`: more
    for the event's detail (a task failure's exit code and restart count, which the notifications tell)."""
    if not can_move(job.state, JobState.RECOVERING):
        return Outcome.ALREADY_DONE
    recoveries = int(job.recoveries) + (0 if counts_as_restart else 1)
    cluster = wiring.store.cluster(job.cluster_id)
    lost = lost_in_a_row(job, cluster, preempted=preempted or counts_as_restart)
    if lost > wiring.settings.crash_loop_limit:
        reason = (
            f"{cause}; crash loop: {lost} attempts in a row were lost before their task started, "
            f"none of them preempted (SKYLESS_CRASH_LOOP_LIMIT={wiring.settings.crash_loop_limit})"
        )
        return _fail_and_teardown(wiring, job, reason)
    blocks = blocks_of(job)
    if preempted and cluster is not None:
        strategy = recovery_options(wiring, job)["strategy"]
        if strategy != FAILOVER and not job.deadline_at:  # a deadline job's policy weighs the region
            # EAGER_NEXT_REGION as SkyPilot's: the region just preempted is avoided for this recovery only
            blocks = [b for b in blocks if not b.reason.startswith(PREEMPTED)]
            blocks.append(Block(cloud=cluster.cloud, region=cluster.region, reason=f"{PREEMPTED}: {cause}"))
    old_cluster = job.cluster_id or cluster_id_for(job.job_id, int(job.attempt))
    next_attempt = int(job.attempt) + 1
    changes: dict[str, Any] = {
        **attempt_fields(wiring.settings, job.job_id, next_attempt),
        "recoveries": recoveries,
        "lost_in_a_row": lost,
        "restarts": int(job.restarts) + (1 if counts_as_restart and spends_a_restart else 0),
        "cluster_id": None,
        "candidate_index": 0,
        "wait_rounds": 0,
        "transient_retries": 0,
        "blocklist": blocks_json(blocks),
        "cost": cost_with(job, cluster),
        **cluster_ended(job, cluster, preempted=preempted, now=time.time()),
        **({"next_check_at": None} if job.deadline_at else {}),
    }
    detail = {
        **(extra_detail or {}),
        "cluster": old_cluster,
        "preempted": preempted,
        "restart": counts_as_restart,
        "warned": warned,
    }
    if not wiring.store.move(job, JobState.RECOVERING, cause, changes=changes, detail=detail):
        return Outcome.ALREADY_DONE
    if preempted and cluster is not None and cluster.use_spot:
        count_preemption(wiring, cluster)
    if then is None:
        send_teardown(wiring, job.job_id, next_attempt - 1, old_cluster)
        send_optimize(wiring, job.job_id, next_attempt, delay_seconds=replan_delay_seconds)
        return Outcome.DONE
    send_optimize(wiring, job.job_id, next_attempt, delay_seconds=replan_delay_seconds)
    try:
        then(job)
    finally:
        send_teardown(wiring, job.job_id, next_attempt - 1, old_cluster)
    return Outcome.DONE


def count_preemption(wiring: Wiring, cluster: ClusterModel) -> None:
    """The preemption, for every job planning spot there (shared/optimizer/cooling.py). Written after the
    move (once per preempted cluster), never in it: the job recovers whatever happens to its evidence; a
    crash between the two loses one entry of evidence, never the job."""
    try:
        wiring.cooldowns.preempted(cluster.cloud, cluster.region, cluster.zone, cluster.cluster_id)
    except Exception:  # evidence is advisory: the recovery's messages must still go out
        log.exception("preemption of %s not counted in the spot evidence", cluster.cluster_id)


def task_started(cluster: ClusterModel | None) -> bool:
    """True when a node of the cluster reported its task running (or done): the attempt got past boot."""
    if cluster is None:
        return False
    return any(node.get("phase") in STARTED_PHASES for node in nodes_of(cluster).values())


def lost_in_a_row(job: JobModel, cluster: ClusterModel | None, *, preempted: bool) -> int:
    """The crash-loop count once this attempt ends: reset by a task that started, kept by a preemption
    (or a restart the task's own failure asked for), one more for an attempt lost at boot."""
    if task_started(cluster) or (cluster is not None and task_running_on(job, cluster)):
        return 0
    return int(job.lost_in_a_row or 0) + (0 if preempted else 1)


def _fail_and_teardown(
    wiring: Wiring,
    job: JobModel,
    reason: str,
    ended: JobState = JobState.FAILED,
    *,
    node_failure: bool = False,
) -> Outcome:
    cluster_id = job.cluster_id or cluster_id_for(job.job_id, int(job.attempt))
    changes = {"reason": reason, "cost": cost_with(job, wiring.store.cluster(job.cluster_id))}
    detail = {"cluster": cluster_id, "node_failure": node_failure}
    if not wiring.store.move(job, ended, reason, changes=changes, detail=detail):
        return Outcome.ALREADY_DONE
    send_teardown(wiring, job.job_id, int(job.attempt), cluster_id)
    tell_group(wiring, job)
    return Outcome.DONE


def fail_job(
    wiring: Wiring,
    job: JobModel,
    reason: str,
    ended: JobState = JobState.FAILED,
    *,
    node_failure: bool = False,
) -> Outcome:
    """FAILED (or `ended`, one of shared.states.FAILURES) with a reason, and the job's cluster torn down.
    `node_failure`: a node was lost."""
    return _fail_and_teardown(wiring, job, reason, ended, node_failure=node_failure)
