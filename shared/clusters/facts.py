"""What a cluster record says, read without I/O: its nodes by rank, its live queue, whether it is busy
(autostop's question), the capacity its jobs share, and what it has cost."""

from __future__ import annotations

import time
from typing import Any

from shared.clusters.queue_policy import Capacity, QueuedJob
from shared.clusters.states import JOB_STARTED, ClusterState


def plain(value: Any) -> Any:
    """A pynamodb map (or a plain dict) as plain dicts, all the way down."""
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def nodes_of(cluster: Any) -> dict[str, dict[str, Any]]:
    return dict(plain(cluster.nodes) or {})


def nodes_by_rank(cluster: Any) -> list[tuple[str, dict[str, Any]]]:
    return sorted(nodes_of(cluster).items(), key=lambda item: int(item[1]["rank"]))


def active_of(cluster: Any) -> dict[int, dict[str, Any]]:
    """The live jobs of the queue: number -> {state, gpus, nodes}."""
    return {int(n): entry for n, entry in (plain(cluster.active) or {}).items()}


def sessions_of(cluster: Any) -> int:
    return sum(int(node.get("sessions") or 0) for node in nodes_of(cluster).values())


def is_busy(cluster: Any) -> bool:
    """A job queued or running, or a shell open on a node: what keeps autostop away."""
    return bool(active_of(cluster)) or sessions_of(cluster) > 0


def queued_jobs(cluster: Any) -> list[QueuedJob]:
    return [
        QueuedJob(
            number=n,
            started=entry.get("state") in {s.value for s in JOB_STARTED},
            num_nodes=int(entry.get("nodes") or 1),
            gpus=float(entry.get("gpus") or 0),
        )
        for n, entry in active_of(cluster).items()
    ]


def capacity_of(cluster: Any) -> Capacity:
    return Capacity(
        num_nodes=int(cluster.num_nodes or 1), gpus_per_node=float(cluster.accelerator_count or 0)
    )


def period_cost(cluster: Any, until: float | None = None) -> float:
    """$ of the current up period (0 when the nodes are not up)."""
    if cluster.up_since is None or cluster.hourly_price is None:
        return 0.0
    end = time.time() if until is None else until
    hours = max(0.0, end - float(cluster.up_since)) / 3600
    return round(float(cluster.hourly_price) * int(cluster.num_nodes or 1) * hours, 6)


def cost_so_far(cluster: Any) -> float:
    return round(float(cluster.cost or 0) + period_cost(cluster), 6)


def autostop_text(cluster: Any) -> str:
    minutes = int(cluster.autostop_minutes if cluster.autostop_minutes is not None else -1)
    if minutes < 0:
        return "-"
    return f"{minutes}m" + (" (down)" if cluster.autostop_down else "")


def is_up(cluster: Any) -> bool:
    return cluster.state == ClusterState.UP.value
