"""What every step of a named cluster's life shares: the conditional write of a step's decision (retried
when only the version moved), the agents' environment, the nodes as the record keeps them, the delays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.clouds.base import Node, ranked
from shared.clusters.tokens import cluster_boot_token
from shared.store.cluster_records import ClusterStore, NamedClusterModel
from shared.wiring import Wiring

MAX_DELAY_SECONDS = 900
ATTEMPTS_ON_RACE = 5


def wait_delay(rounds: int) -> int:
    return min(MAX_DELAY_SECONDS, 30 * 2**rounds)


def transient_delay(retries: int) -> int:
    return min(MAX_DELAY_SECONDS, 5 * 2**retries)


def write_in_step(
    store: ClusterStore,
    cluster: NamedClusterModel,
    changes: dict[Any, Any] | Callable[[NamedClusterModel], dict[Any, Any]],
    **options: Any,
) -> NamedClusterModel | None:
    """Take this step's decision on the cluster as read; when only its version moved meanwhile (a job
    queued, a node reported) but not its step (state, operation, incarnation), take it again on a fresh
    read. Answers the cluster as written, or None when the cluster moved on to another step."""
    for _ in range(ATTEMPTS_ON_RACE):
        values = changes(cluster) if callable(changes) else changes
        if store.write_cluster(cluster, values, **options):
            return cluster
        latest = store.get(cluster.key)
        if latest is None or step_of(latest) != step_of(cluster):
            return None
        cluster = latest
    return None


def step_of(cluster: NamedClusterModel) -> tuple[Any, ...]:
    """What identifies a step and its progress: a duplicate delivery that already moved it differs here."""
    return (
        cluster.state,
        cluster.pending_op,
        int(cluster.incarnation),
        int(cluster.candidate_index),
        int(cluster.wait_rounds),
        int(cluster.transient_retries),
    )


def cluster_store(wiring: Wiring) -> ClusterStore:
    return ClusterStore(wiring.settings)


def agent_env(wiring: Wiring, key: str) -> dict[str, str]:
    """What a cluster's node agents start with, beside their identity (user-data / process env)."""
    return {
        "SKYLESS_API_URL": wiring.settings.api_url or "",
        "SKYLESS_BOOT_TOKEN": cluster_boot_token(wiring.settings, key),
        "SKYLESS_AGENT_MODE": "cluster",
        "SKYLESS_CLUSTER_KEY": key,
    }


def node_entries(nodes: list[Node], now: float) -> dict[str, dict[str, Any]]:
    return {
        node.instance_id: {
            "rank": rank,
            "ip": node.ip,
            "public_ip": node.public_ip,
            "heartbeat_at": now,
            "sessions": 0,
            "ready": False,
        }
        for rank, node in enumerate(ranked(nodes))
    }
