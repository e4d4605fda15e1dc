"""The named clusters' part of the scheduled reconcile sweep: find what a lost message or a lost node left.

- INIT, STOPPING, TERMINATING for longer than `stuck_after_seconds`: the step's message is sent again (each
  step is idempotent, so a message that was only slow does no harm).
- UP with a node the cloud lists as gone (a spot reclaim, a VM deleted by hand): the cluster cannot run its
  jobs any more; they fail, and the cluster is torn down (SkyPilot shows such a cluster as INIT; skyless
  does not recover clusters, only managed jobs).
- UP, idle, autostop on, and past due: a lost autostop check is sent again.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from shared.clouds.errors import CloudError
from shared.clusters.autostop import after_becoming_idle, idle_seconds
from shared.clusters.facts import is_busy, nodes_by_rank
from shared.clusters.job_queue import end_job
from shared.clusters.messages import Action, send_cluster_step
from shared.clusters.states import JOB_LIVE, ClusterJobState, ClusterState
from shared.store.cluster_records import ClusterStore, NamedClusterModel
from shared.wiring import Wiring, current_wiring

logger = logging.getLogger("skyless.clusters")
REDRIVE: dict[ClusterState, Action] = {
    ClusterState.STOPPING: "stop",
    ClusterState.TERMINATING: "down",
}


def sweep_clusters(wiring: Wiring | None = None, now: float | None = None) -> dict[str, list[str]]:
    wiring = wiring or current_wiring()
    now = time.time() if now is None else now
    store = ClusterStore(wiring.settings)
    done: dict[str, list[str]] = defaultdict(list)
    for cluster in store.live_clusters():
        state = ClusterState(cluster.state)
        stuck = now - float(cluster.updated_at) > wiring.settings.stuck_after_seconds
        if state == ClusterState.INIT and stuck:
            if cluster.pending_op == "start":
                send_cluster_step(wiring, cluster.key, "start", incarnation=int(cluster.incarnation))
            else:
                send_cluster_step(wiring, cluster.key, "launch", incarnation=int(cluster.incarnation))
            done["redriven"].append(cluster.name)
        elif state in REDRIVE and stuck:
            send_cluster_step(wiring, cluster.key, REDRIVE[state])
            done["redriven"].append(cluster.name)
        elif state == ClusterState.UP:
            _check_up(wiring, store, cluster, now, done)
    return dict(done)


def _check_up(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, now: float, done: dict[str, list[str]]
) -> None:
    try:
        listed = {n.instance_id: n.state for n in wiring.providers.build(str(cluster.provider)).describe(
            str(cluster.provider_cluster))}  # fmt: skip
    except CloudError as error:
        logger.warning("describe %s failed: %s", cluster.provider_cluster, error)
        return
    for instance_id, node in nodes_by_rank(cluster):
        if listed.get(instance_id, "terminated") != "running":
            lose_cluster(wiring, store, cluster, f"node rank {int(node['rank'])} ({instance_id}) is gone")
            done["lost"].append(cluster.name)
            return
    if int(cluster.autostop_minutes) < 0 or cluster.idle_since is None or is_busy(cluster):
        return
    overdue = float(cluster.idle_since) + idle_seconds(wiring, cluster) + wiring.settings.stuck_after_seconds
    if now > overdue:
        after_becoming_idle(wiring, cluster)
        done["autostop"].append(cluster.name)


def lose_cluster(wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, cause: str) -> None:
    """A node is gone: the cluster's live jobs fail and the cluster is torn down."""
    live = {s.value for s in JOB_LIVE}
    for job in store.jobs_of(cluster.key):
        if job.state in live:
            end_job(store, cluster.key, job, ClusterJobState.FAILED, f"the cluster lost a node: {cause}")
    for _ in range(5):
        latest = store.get(cluster.key)
        if latest is None or latest.state != ClusterState.UP:
            return
        changes = {"state": ClusterState.TERMINATING.value, "reason": f"lost: {cause}"}
        if store.write_cluster(latest, changes, message=f"TERMINATING: {cause}"):
            send_cluster_step(wiring, latest.key, "down")
            return


def resume_local_clusters(wiring: Wiring) -> list[str]:
    """The local runtime came back up (`skyless local up`): the nodes of UP clusters on the local cloud were
    stopped with it (as a host shutdown stops its VMs, disks kept); start them again. Answers their names."""
    from shared.clouds.base import StoppableProvider
    from shared.clusters.steps import agent_env

    resumed = []
    for cluster in ClusterStore(wiring.settings).live_clusters():
        if cluster.state != ClusterState.UP or cluster.provider != "local" or not cluster.provider_cluster:
            continue
        provider = wiring.providers.build("local")
        states = {node.state for node in provider.describe(str(cluster.provider_cluster))}
        if "stopped" in states and isinstance(provider, StoppableProvider):
            provider.start(str(cluster.provider_cluster), agent_env(wiring, cluster.key))
            resumed.append(cluster.name)
    return resumed
