"""Lambda, scheduled (EventBridge rate): the reconcile sweep of jobs (shared.jobs.reconcile) and of named
clusters (shared.clusters.health)."""

from typing import Any

from shared.clusters.health import sweep_clusters
from shared.jobs.reconcile import reconcile_event


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"actions": reconcile_event(event), "clusters": sweep_clusters()}
