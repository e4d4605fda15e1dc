"""Lambda, scheduled (EventBridge rate): the orphan reaper (shared.reaper)."""

from typing import Any

from shared.reaper import reap_orphans


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return reap_orphans().as_dict()
