"""One catalog refresh: ask each configured pricing source, merge, store a new version if prices moved.

A provider whose API fails keeps the prices it had (the previous version's rows for that cloud, or the
built-in ones when there is no previous version) and the failure is recorded in the version's manifest
and in `catalog/last-refresh.json`; the other providers still refresh. A run whose rows equal those of
LATEST writes no new version: every version is a price change, so warm optimize functions reload only
when there is something new to load.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.aws.object_store import ObjectStore
from shared.catalog.model import Catalog, build_catalog, default_sources
from shared.catalog.offering import Offering
from shared.errors import CatalogError
from shared.price_refresh.merge import apply_prices, carry_previous_prices
from shared.price_refresh.quotes import PriceFetcher
from shared.price_refresh.versioned_catalog import (
    LAST_REFRESH_KEY,
    read_latest,
    read_version,
    write_version,
)

logger = logging.getLogger("skyless.price_refresh")


@dataclass
class RefreshReport:
    checked_at: str
    version: str | None  # the version LATEST names after this run
    new_version: bool
    clouds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked_at": self.checked_at,
            "version": self.version,
            "new_version": self.new_version,
            "clouds": self.clouds,
        }


def refresh_catalog(
    objects: ObjectStore,
    fetchers: Sequence[PriceFetcher],
    *,
    base: Catalog | None = None,
    now: datetime | None = None,
) -> RefreshReport:
    """Refresh every fetcher's cloud into a new catalog version (when prices moved)."""
    now = now or datetime.now(UTC)
    base = base or build_catalog(default_sources())
    latest = read_latest(objects)
    previous: dict[str, list[Offering]] = {}
    if latest is not None:
        try:
            previous = read_version(objects, latest.version)
        except (CatalogError, ValueError) as error:  # start over from the built-in prices
            logger.error("catalog version %s unreadable (%s): refreshing without it", latest.version, error)
    rows_by_cloud: dict[str, list[Offering]] = {}
    status: dict[str, dict[str, Any]] = {}
    for fetcher in fetchers:
        cloud = fetcher.cloud
        base_rows = base.by_cloud(cloud)
        fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            prices = fetcher.fetch(base_rows)
        except Exception as error:  # any failure of one provider must leave the others refreshing
            logger.exception("price refresh of %s failed; keeping its previous prices", cloud)
            kept_from = latest.version if latest and cloud in previous else "built-in"
            status[cloud] = {"status": "failed", "error": f"{type(error).__name__}: {error}"[:500],
                             "attempted_at": fetched_at, "prices_from": kept_from}  # fmt: skip
            if cloud in previous:
                rows_by_cloud[cloud] = previous[cloud]
            status[cloud]["rows"] = len(previous.get(cloud, ()))
            continue
        carried = carry_previous_prices(base_rows, previous.get(cloud, ()))
        rows, stats = apply_prices(carried, prices)
        status[cloud] = {
            "status": "partial" if prices.problems else "refreshed",
            "source": prices.source,
            "fetched_at": fetched_at,
            "quotes": len(prices.quotes) + len(prices.described),
            "repriced": stats.repriced,
            "unmatched": stats.unmatched,
            "added": stats.added,
            "rows": stats.rows,
            "problems": list(prices.problems)[:20],
        }
        if rows:
            rows_by_cloud[cloud] = rows
    pointer = write_version(objects, rows_by_cloud, status, now) if rows_by_cloud else None
    report = RefreshReport(
        checked_at=now.isoformat(timespec="seconds"),
        version=pointer.version if pointer else (latest.version if latest else None),
        new_version=pointer is not None,
        clouds=status,
    )
    objects.put_text(LAST_REFRESH_KEY, json.dumps(report.as_dict(), indent=2, sort_keys=True))
    return report
