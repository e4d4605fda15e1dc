"""Lambda, scheduled (EventBridge rate): the orphan reaper (shared.jobs.reaper)."""

from typing import Any

from shared.jobs.reaper import reap_orphans


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return reap_orphans().as_dict()
