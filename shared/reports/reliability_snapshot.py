"""The deployment's provider scorecard, kept as a small JSON object that plans read when the reliability prior
is on (`SKYLESS_RELIABILITY_PRIOR_DAYS`, shared/optimizer/reliability.py weighs it).

The reconcile sweep refreshes it at most once per `REFRESH_SECONDS`: one scorecard over every user's jobs of
the last `days` days (shared/reports/provider_reads.py: at most 2,000 jobs, their clusters and timelines).
A plan reads the object (one GET, kept for `READ_TTL_SECONDS` in a warm process), never the history itself.
With the prior off, nothing is read or written.
"""

from __future__ import annotations

import json
import time
from typing import Any

from shared.config.control_plane import ReliabilityPriorConfig
from shared.optimizer.reliability import SNAPSHOT_KEY
from shared.wiring import Wiring

REFRESH_SECONDS = 3600


def _record(line: Any) -> dict[str, Any]:
    return {
        "cloud": line.cloud,
        "region": line.region,
        "family": line.family,
        "launch_requests": line.launch_requests,
        "refusals": line.capacity_refusals + line.other_refusals,
        "spot_hours": line.spot_hours,
        "preemptions": line.preemptions,
        "median_seconds_to_running": line.median_seconds_to_running,
    }


def refresh_reliability_snapshot(
    wiring: Wiring, now: float | None = None, config: ReliabilityPriorConfig | None = None
) -> str:
    """ "written", "fresh" (written less than REFRESH_SECONDS ago) or "off"."""
    config = config or ReliabilityPriorConfig.from_env()
    if config.days <= 0:
        return "off"
    now = time.time() if now is None else now
    found = wiring.objects.get_text(SNAPSHOT_KEY)
    if found is not None:
        written = json.loads(found)
        if written.get("days") == config.days and now - float(written.get("written_at", 0)) < REFRESH_SECONDS:
            return "fresh"
    from shared.reports.provider_reads import provider_scorecard  # only with the prior on (cold start)

    card = provider_scorecard(wiring, owner=None, days=config.days, now=now)
    body = {"written_at": now, "days": config.days, "jobs_read": card.jobs_read,
            "places": [_record(line) for line in card.lines]}  # fmt: skip
    wiring.objects.put_json(SNAPSHOT_KEY, body)
    return "written"
