"""Lambda, scheduled (EventBridge rate): the reconcile sweep of jobs (shared.jobs.reconcile) and of named
clusters (shared.clusters.health), and the scorecard snapshot the opt-in reliability prior reads."""

from typing import Any

from shared.clusters.health import sweep_clusters
from shared.jobs.reconcile import reconcile_event
from shared.reports.reliability_snapshot import refresh_reliability_snapshot
from shared.wiring import current_wiring


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "actions": reconcile_event(event),
        "clusters": sweep_clusters(),
        "reliability": refresh_reliability_snapshot(current_wiring()),
    }
