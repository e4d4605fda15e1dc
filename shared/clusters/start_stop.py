"""A named cluster's nodes after their launch: start them again, stop them (disks kept), tear them down.
Each acts only on the state its message is about (INIT with `start`, STOPPING, TERMINATING)."""

from __future__ import annotations

import time
from typing import Any

from shared.clouds.base import StoppableProvider
from shared.clouds.errors import (
    CloudError,
    InvalidLaunchError,
    TransientCloudError,
)
from shared.clusters.facts import active_of, period_cost
from shared.clusters.messages import ClusterMessage, send_cluster_step
from shared.clusters.names import provider_cluster_id
from shared.clusters.states import JOB_LIVE, ClusterJobState, ClusterState
from shared.clusters.steps import ATTEMPTS_ON_RACE, agent_env, node_entries, transient_delay, write_in_step
from shared.jobs.outcomes import Outcome
from shared.store.cluster_records import ClusterStore, NamedClusterModel
from shared.wiring import Wiring


def start_cluster_nodes(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, message: ClusterMessage
) -> Outcome:
    if cluster.state != ClusterState.INIT or cluster.pending_op != "start":
        return Outcome.ALREADY_DONE
    provider = wiring.providers.build(str(cluster.provider))
    if not isinstance(provider, StoppableProvider):
        return _start_failed(store, cluster, f"the {provider.name} provider cannot start VMs")
    try:
        nodes = provider.start(str(cluster.provider_cluster), agent_env(wiring, cluster.key))
    except TransientCloudError as error:
        retries = int(cluster.transient_retries)
        if retries >= wiring.settings.max_transient_retries:
            return _start_failed(store, cluster, error.message)
        changes = {"transient_retries": retries + 1}
        if write_in_step(store, cluster, changes, message=f"start: {error.message}") is not None:
            send_cluster_step(wiring, cluster.key, "start", delay_seconds=transient_delay(retries))
        return Outcome.RETRY_LATER
    except CloudError as error:
        return _start_failed(store, cluster, error.message)
    from shared.clusters.autostop import after_becoming_idle
    from shared.clusters.job_queue import schedule_jobs

    now = time.time()
    entries = node_entries(nodes, now)

    def up(current: NamedClusterModel) -> dict[Any, Any]:
        return {
            "state": ClusterState.UP.value,
            "pending_op": None,
            "reason": None,
            "transient_retries": 0,
            "nodes": entries,
            "up_since": now,
            "idle_since": None if active_of(current) else now,
        }

    written = write_in_step(store, cluster, up, message=f"UP: {len(nodes)} node(s) started again")
    if written is None:
        return Outcome.ALREADY_DONE
    schedule_jobs(wiring, cluster.key)
    if written.idle_since is not None:
        after_becoming_idle(wiring, written)
    return Outcome.DONE


def _start_failed(store: ClusterStore, cluster: NamedClusterModel, reason: str) -> Outcome:
    changes = {
        "state": ClusterState.STOPPED.value,
        "pending_op": None,
        "reason": f"could not start: {reason}",
    }
    moved = write_in_step(store, cluster, changes, message=f"could not start: {reason}") is not None
    if moved:
        _end_live_jobs(store, cluster, ClusterJobState.FAILED, f"the cluster could not start: {reason}")
    return Outcome.DONE if moved else Outcome.ALREADY_DONE


def stop_cluster_nodes(wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel) -> Outcome:
    if cluster.state != ClusterState.STOPPING:
        return Outcome.ALREADY_DONE
    provider = wiring.providers.build(str(cluster.provider))
    if not isinstance(provider, StoppableProvider):  # refused before STOPPING; kept as a guard
        raise InvalidLaunchError(f"the {provider.name} provider cannot stop VMs")
    provider.stop(str(cluster.provider_cluster))  # a CloudError raises: the message is retried
    _end_live_jobs(store, cluster, ClusterJobState.CANCELLED, "the cluster was stopped")
    now = time.time()
    changes = {
        "state": ClusterState.STOPPED.value,
        "cost": round(float(cluster.cost or 0) + period_cost(cluster, now), 6),
        "up_since": None,
        "idle_since": None,
        "nodes": {iid: {**node, "sessions": 0, "ready": False} for iid, node in _nodes(cluster).items()},
    }
    for _ in range(ATTEMPTS_ON_RACE):
        if store.write_cluster(cluster, changes, message="STOPPED: every node stopped, disks kept"):
            return Outcome.DONE
        latest = store.get(cluster.key)
        if latest is None or latest.state != ClusterState.STOPPING:
            return Outcome.ALREADY_DONE
        cluster = latest
    return Outcome.RETRY_LATER


def tear_down_cluster(wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel) -> Outcome:
    """Terminate every launch of the cluster by tag, end its live jobs, release its name."""
    if cluster.state != ClusterState.TERMINATING:
        return Outcome.ALREADY_DONE
    providers = (
        [wiring.providers.build(cluster.provider)]
        if cluster.provider
        else wiring.providers.usable_providers()
    )
    for provider in providers:
        for incarnation in range(int(cluster.incarnation) + 1):
            provider.terminate(provider_cluster_id(cluster.key, incarnation))
    _end_live_jobs(store, cluster, ClusterJobState.CANCELLED, "the cluster was torn down")
    now = time.time()
    for _ in range(ATTEMPTS_ON_RACE):
        changes = {
            "state": ClusterState.TERMINATED.value,
            "cost": round(float(cluster.cost or 0) + period_cost(cluster, now), 6),
            "up_since": None,
            "idle_since": None,
            "active": {},
        }
        claim = store.claim(cluster.owner, cluster.name)
        release = []
        if claim is not None and claim.cluster_key == cluster.key:
            release = [("delete", claim, None, store.claims.cluster_key == cluster.key)]
        if store.write_cluster(cluster, changes, also=release, message="TERMINATED: every node terminated"):
            return Outcome.DONE
        latest = store.get(cluster.key)
        if latest is None or latest.state != ClusterState.TERMINATING:
            return Outcome.ALREADY_DONE
        cluster = latest
    return Outcome.RETRY_LATER


def _end_live_jobs(store: ClusterStore, cluster: NamedClusterModel, to: ClusterJobState, reason: str) -> None:
    """Every live job of the cluster ends (`to`), each with its own conditional write."""
    from shared.clusters.job_queue import end_job

    live = {s.value for s in JOB_LIVE}
    for job in store.jobs_of(cluster.key):
        if job.state in live:
            end_job(store, cluster.key, job, to, reason)


def _nodes(cluster: NamedClusterModel) -> dict[str, dict[str, Any]]:
    from shared.clusters.facts import nodes_of

    return nodes_of(cluster)
