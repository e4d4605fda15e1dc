"""A cluster record's nodes as plain dicts, by instance id and by rank."""

from __future__ import annotations

from typing import Any

from shared.store.models import ClusterModel


def nodes_of(cluster: ClusterModel) -> dict[str, dict[str, Any]]:
    raw = cluster.nodes
    data = raw.as_dict() if hasattr(raw, "as_dict") else dict(raw or {})
    return {iid: (n.as_dict() if hasattr(n, "as_dict") else dict(n)) for iid, n in data.items()}


def by_rank(cluster: ClusterModel) -> list[tuple[str, dict[str, Any]]]:
    return sorted(nodes_of(cluster).items(), key=lambda item: int(item[1]["rank"]))
