"""Lambda, scheduled (EventBridge rate): the reconcile sweep (shared.jobs.reconcile)."""

from typing import Any

from shared.jobs.reconcile import reconcile_event


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"actions": reconcile_event(event)}
