"""The cloud side of a named cluster, one queue message at a time: launch (walk the plan's candidates, fail
over, wait with a delayed message when nothing has room), start a stopped cluster, stop it, tear it down.

Each step acts only on the state its message is about (`INIT` with the same incarnation for launch and
start, `STOPPING` for stop, `TERMINATING` for down), so a message delivered twice, late or out of order does
nothing the second time. The decision (a conditional write) always comes before the message; the cloud call
comes after it and is idempotent (tags, the incarnation as client token). Crash windows: a launch that
started nodes and died before recording them is found again by the redelivered message (same client token)
or, if the cluster was torn down meanwhile, by `down` (terminate by tag) and the reaper.
"""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

from shared.clouds.base import LaunchSpec, Node
from shared.clouds.errors import CloudError, InvalidLaunchError, TransientCloudError
from shared.clusters.facts import active_of
from shared.clusters.messages import ClusterMessage, send_cluster_step
from shared.clusters.names import provider_cluster_id
from shared.clusters.start_stop import start_cluster_nodes, stop_cluster_nodes, tear_down_cluster
from shared.clusters.states import ClusterState, cluster_transition
from shared.clusters.steps import (
    agent_env,
    cluster_store,
    node_entries,
    transient_delay,
    wait_delay,
    write_in_step,
)
from shared.jobs.blocks import (
    block_for,
    blocks_json,
    blocks_of,
    is_blocked,
    sticky,
    zone_block,
)
from shared.jobs.launching import candidate_shape, resource_launch_fields
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import candidate_text
from shared.optimizer.plan import Block, Candidate, Plan
from shared.store.cluster_records import ClusterStore, NamedClusterModel
from shared.task.spec import Pipeline
from shared.wiring import Wiring, current_wiring


def cluster_step(body: dict[str, Any], wiring: Wiring | None = None) -> Outcome:
    """One message of a named cluster (shared/clusters/messages.py)."""
    from shared.clusters.autostop import check_autostop

    wiring = wiring or current_wiring()
    message = ClusterMessage.from_body(body)
    store = cluster_store(wiring)
    cluster = store.get(message.cluster)
    if cluster is None:
        return Outcome.UNKNOWN_JOB
    if message.action == "launch":
        return launch_cluster_nodes(wiring, store, cluster, message)
    if message.action == "start":
        return start_cluster_nodes(wiring, store, cluster, message)
    if message.action == "stop":
        return stop_cluster_nodes(wiring, store, cluster)
    if message.action == "down":
        return tear_down_cluster(wiring, store, cluster)
    return check_autostop(wiring, store, cluster, message)


# -- launch ------------------------------------------------------------------------------------


def launch_cluster_nodes(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, message: ClusterMessage
) -> Outcome:
    if cluster.state != ClusterState.INIT or cluster.pending_op != "launch":
        return Outcome.ALREADY_DONE
    if message.incarnation != int(cluster.incarnation):
        return Outcome.STALE
    plan_item = store.plan_item(cluster.key)
    if plan_item is None:
        return _give_up(wiring, store, cluster, "the cluster has no plan")
    plan = Plan.from_json(zlib.decompress(plan_item.plan_z))
    task = Pipeline.model_validate(json.loads(plan_item.task)).tasks[0]
    candidates = plan.tasks[0].candidates
    blocks = blocks_of(cluster)  # type: ignore[arg-type]  # reads only `blocklist`, which both records have
    tried: list[str] = []
    index = int(cluster.candidate_index)
    while index < len(candidates):
        candidate = candidates[index]
        if is_blocked(candidate, blocks):
            index += 1
            continue
        try:
            nodes = _launch(wiring, cluster, candidate, task)
        except TransientCloudError as error:
            if int(cluster.transient_retries) < wiring.settings.max_transient_retries:
                return _retry_later(wiring, store, cluster, index, blocks, error)
            blocks.append(zone_block(candidate, f"transient: {error.message}"))
        except InvalidLaunchError as error:
            return _give_up(wiring, store, cluster, f"{candidate_text(candidate)}: {error.message}")
        except CloudError as error:
            blocks.append(block_for(candidate, error))
            tried.append(f"{candidate.place} {candidate.instance_type}: {error.message}")
        else:
            return _record_launch(wiring, store, cluster, candidate, blocks, nodes)
        index += 1
    return _wait_or_give_up(wiring, store, cluster, blocks, tried)


def _launch(wiring: Wiring, cluster: NamedClusterModel, candidate: Candidate, task: Any) -> list[Node]:
    provider = wiring.providers.provider_for(candidate.cloud)
    cluster_id = provider_cluster_id(cluster.key, int(cluster.incarnation))
    fields = resource_launch_fields(task.resources, candidate.cloud)
    fields["labels"]["skyless-cluster-name"] = cluster.name
    spec = LaunchSpec(
        job_id=cluster.key,
        cluster_id=cluster_id,
        attempt_id=cluster_id,
        attempt=int(cluster.incarnation),
        agent_env=agent_env(wiring, cluster.key),
        **candidate_shape(candidate),
        **fields,
    )
    return provider.launch(spec)


def _record_launch(
    wiring: Wiring,
    store: ClusterStore,
    cluster: NamedClusterModel,
    candidate: Candidate,
    blocks: list[Block],
    nodes: list[Node],
) -> Outcome:
    from shared.clusters.autostop import after_becoming_idle

    now = time.time()
    cluster_transition(cluster.state, ClusterState.UP)
    changes: dict[Any, Any] = {
        "state": ClusterState.UP.value,
        "pending_op": None,
        "reason": None,
        "provider": wiring.providers.provider_for(candidate.cloud).name,
        "provider_cluster": provider_cluster_id(cluster.key, int(cluster.incarnation)),
        "cloud": candidate.cloud,
        "region": candidate.region,
        "zone": candidate.zone,
        "instance_type": candidate.instance_type,
        "use_spot": candidate.use_spot,
        "hourly_price": candidate.hourly_price,
        "num_nodes": len(nodes),
        "accelerator": candidate.accelerator,
        "accelerator_count": candidate.accelerator_count if candidate.accelerator else 0,
        "blocklist": blocks_json(blocks),
        "nodes": node_entries(nodes, now),
        "up_since": now,
    }
    message = f"UP: {len(nodes)} node(s) on {candidate_text(candidate)}"

    def with_idle(current: NamedClusterModel) -> dict[Any, Any]:
        return {**changes, "idle_since": None if active_of(current) else now}

    detail = {"instances": sorted(changes["nodes"])}
    written = write_in_step(store, cluster, with_idle, message=message, detail=detail)
    if written is not None:
        from shared.clusters.job_queue import schedule_jobs

        schedule_jobs(wiring, cluster.key)
        if written.idle_since is not None:
            after_becoming_idle(wiring, written)
        return Outcome.DONE
    latest = store.get(cluster.key)
    if (
        latest is not None
        and latest.state == ClusterState.UP
        and latest.provider_cluster == changes["provider_cluster"]
    ):
        return Outcome.ALREADY_DONE  # a concurrent delivery recorded the same launch
    if latest is None or latest.state in (ClusterState.TERMINATING, ClusterState.TERMINATED):
        # Torn down while we launched: what we started must not outlive the cluster.
        wiring.providers.provider_for(candidate.cloud).terminate(changes["provider_cluster"])
    return Outcome.ALREADY_DONE


def _retry_later(
    wiring: Wiring,
    store: ClusterStore,
    cluster: NamedClusterModel,
    index: int,
    blocks: list[Block],
    error: CloudError,
) -> Outcome:
    retries = int(cluster.transient_retries)
    delay = transient_delay(retries)
    changes = {"candidate_index": index, "blocklist": blocks_json(blocks), "transient_retries": retries + 1}
    text = f"transient cloud error, retrying in {delay} s: {error.message}"
    if write_in_step(store, cluster, changes, message=text) is not None:
        send_cluster_step(
            wiring, cluster.key, "launch", incarnation=int(cluster.incarnation), delay_seconds=delay
        )
    return Outcome.RETRY_LATER


def _wait_or_give_up(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, blocks: list[Block], tried: list[str]
) -> Outcome:
    rounds = int(cluster.wait_rounds)
    if rounds >= wiring.settings.max_wait_retries:
        return _give_up(
            wiring,
            store,
            cluster,
            f"no capacity anywhere after {rounds + 1} rounds ({'; '.join(tried[-5:])})",
        )
    delay = wait_delay(rounds)
    changes = {"wait_rounds": rounds + 1, "candidate_index": 0, "blocklist": blocks_json(sticky(blocks))}
    message = f"no candidate had capacity; retrying in {delay} s"
    if write_in_step(store, cluster, changes, message=message, detail={"tried": tried[-10:]}) is None:
        return Outcome.ALREADY_DONE
    send_cluster_step(
        wiring, cluster.key, "launch", incarnation=int(cluster.incarnation), delay_seconds=delay
    )
    return Outcome.RETRY_LATER


def _give_up(wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, reason: str) -> Outcome:
    """A launch that cannot succeed: the cluster is torn down (whatever a candidate left goes by tag)."""
    changes = {
        "state": ClusterState.TERMINATING.value,
        "reason": f"launch failed: {reason}",
        "pending_op": None,
    }
    if write_in_step(store, cluster, changes, message=f"launch failed: {reason}") is None:
        return Outcome.ALREADY_DONE
    send_cluster_step(wiring, cluster.key, "down")
    return Outcome.DONE


# -- start, stop, down -------------------------------------------------------------------------
