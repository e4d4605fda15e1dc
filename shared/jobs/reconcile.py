"""The scheduled sweep: find what events missed. Silent nodes, stuck jobs, clusters that outlived their jobs.
Heartbeats and the clouds' own listings (by tag) are the ground truth; our records are not.

VMs a cloud runs that no record knows of are the orphan reaper's (shared/jobs/reaper.py, its own schedule): it
gives them a grace period and records each kill. This sweep ends only clusters we recorded whose job is over
(a teardown that was lost).

Jobs are checked in a random order: a sweep that dies part-way (a crash, the Lambda's time limit) leaves
different jobs unchecked each time, never the same tail of the listing."""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from shared.clouds.errors import CloudError
from shared.jobs.budget_checks import BudgetSweep
from shared.jobs.costs import end_cluster
from shared.jobs.job_groups import step_group
from shared.jobs.messages import send_launch, send_optimize
from shared.jobs.nodes import nodes_of, task_running_on
from shared.jobs.outcomes import Outcome
from shared.jobs.recovery import fail_job, recover_job
from shared.states import HAS_NODES, JobState, is_terminal
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring, current_wiring

logger = logging.getLogger("skyless.reconcile")

REDRIVE_OPTIMIZE = (JobState.PENDING, JobState.RECOVERING)
REDRIVE_LAUNCH = (JobState.PLANNED, JobState.PROVISIONING)
WAITING_GRACE_SECONDS = 900  # a WAITING job's delayed message is at most this late


def reconcile(now: float | None = None, wiring: Wiring | None = None) -> dict[str, list[str]]:
    """One sweep. Returns what it did, by kind, for the log and the tests."""
    wiring = wiring or current_wiring()
    now = time.time() if now is None else now
    done: dict[str, list[str]] = defaultdict(list)
    live = wiring.store.live_jobs()
    budgets = BudgetSweep(wiring, now, live)
    for job in random.sample(live, len(live)):
        _check_job(wiring, job, now, done)
        verdict = budgets.check(job)
        if verdict is not None:
            done[f"budget_{verdict}"].append(job.job_id)
    _close_cluster_records(wiring, done, just_ended={*done.get("recovered", []), *done.get("failed", [])})
    return {kind: sorted(ids) for kind, ids in done.items()}  # in a stable order (checked at random)


def _check_job(wiring: Wiring, job: JobModel, now: float, done: dict[str, list[str]]) -> None:
    settings = wiring.settings
    state = JobState(job.state)
    idle = now - float(job.updated_at)
    if job.group_tasks:  # a job group has no nodes: step it, in case a member's message was lost
        if step_group(wiring, job.job_id, now) == Outcome.DONE:
            done["stepped"].append(job.job_id)
        return
    if state in HAS_NODES:
        cluster = wiring.store.cluster(job.cluster_id)
        if cluster is not None:
            _check_nodes(wiring, job, cluster, now, done)
    elif idle > settings.stuck_after_seconds:
        if state in REDRIVE_OPTIMIZE:
            send_optimize(wiring, job.job_id, int(job.attempt))
            done["redriven"].append(job.job_id)
        elif state in REDRIVE_LAUNCH or (
            state == JobState.WAITING and idle > settings.stuck_after_seconds + WAITING_GRACE_SECONDS
        ):
            send_launch(wiring, job.job_id, int(job.attempt))
            done["redriven"].append(job.job_id)


def _check_nodes(
    wiring: Wiring, job: JobModel, cluster: ClusterModel, now: float, done: dict[str, list[str]]
) -> None:
    """A node the cloud lists as gone is lost (recover, as for a preemption event); a node the cloud
    still lists but that stopped heartbeating is lost too (recover if spot, else FAILED)."""
    settings = wiring.settings
    provider = wiring.providers.build(cluster.provider)
    try:
        listed = {n.instance_id: n.state for n in provider.describe(cluster.cluster_id)}
    except CloudError as error:  # the cloud cannot answer now: judge by heartbeats alone
        logger.warning("describe %s failed: %s", cluster.cluster_id, error)
        listed = {instance_id: "running" for instance_id in nodes_of(cluster)}
    started = task_running_on(job, cluster)  # the last node's own `running` is not written: the job says it
    for instance_id, node in nodes_of(cluster).items():
        if node.get("phase") in ("succeeded", "failed"):
            continue
        rank = int(node["rank"])
        if listed.get(instance_id, "terminated") != "running":
            cause = f"node rank {rank} ({instance_id}) is gone: the cloud lists it as terminated"
            recover_job(wiring, job, cause, preempted=cluster.use_spot)
            done["recovered"].append(job.job_id)
            return
        last = float(node.get("heartbeat_at") or cluster.launched_at)
        booting = not started and node.get("phase") == "launched" and last <= float(cluster.launched_at)
        allowed = settings.boot_grace_seconds if booting else settings.silent_after_seconds
        if now - last > allowed:
            since = datetime.fromtimestamp(last, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            cause = f"node rank {rank} ({instance_id}) silent since {since}"
            if cluster.use_spot:  # never heard from while listed as running: a boot failure, not preempted
                recover_job(wiring, job, cause, preempted=not booting)
                done["recovered"].append(job.job_id)
            else:
                fail_job(wiring, job, cause, node_failure=True)
                done["failed"].append(job.job_id)
            return


def _close_cluster_records(wiring: Wiring, done: dict[str, list[str]], just_ended: set[str]) -> None:
    """Terminate UP clusters that are not their live job's current one (a lost teardown), and say so in
    the job's timeline. Clusters this sweep itself let go of have their teardown on its way."""
    for cluster in wiring.store.live_clusters():
        if cluster.job_id in just_ended:
            continue
        job = wiring.store.get(cluster.job_id)
        if job is not None and not is_terminal(job.state) and job.cluster_id == cluster.cluster_id:
            continue
        wiring.providers.build(cluster.provider).terminate(cluster.cluster_id)
        if end_cluster(wiring, cluster, job.owner if job is not None else None):
            why = "its job is over" if job is None or is_terminal(job.state) else "its job moved on"
            message = f"reconcile terminated cluster {cluster.cluster_id}: {why} (a lost teardown)"
            wiring.store.note(cluster.job_id, "teardown", message, {"cluster": cluster.cluster_id})
            done["terminated"].append(cluster.cluster_id)


def reconcile_event(event: dict[str, Any]) -> dict[str, list[str]]:
    """The scheduled event's content does not matter: each sweep looks at everything."""
    return reconcile()
