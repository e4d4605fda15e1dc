"""Lambda, scheduled (EventBridge rate): refresh prices into a new catalog version (shared.price_refresh)."""

from typing import Any

from shared.price_refresh.price_sources import refresh_catalog_event


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return refresh_catalog_event(event)
