"""Which of a task's feasible candidates a job keeps as its failover list: a few, spread over places.

The optimizer ranks every feasible (cloud, region, zone, instance type, market); a job stores a short list
(its record is rewritten at every step and billed by size). The cheapest N are often one cloud's zones, so a
capacity shortage in that cloud would exhaust the list without trying anything else. The kept list spans
places instead, in this priority: the best candidate of every cloud, then of every region, then of every
zone, then the rest; it keeps the optimizer's order, so failover still goes cheapest first. A job that
exhausts its list is re-planned with what failed blocked (shared/jobs/provisioning.py), which reaches past it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shared.optimizer.plan import Candidate

DEFAULT_KEPT = 24
# Planned candidates looked at per task: the whole feasible set of the built-in catalog (a few hundred),
# a bound on large imported catalogs.
MAX_RANKED = 5000

_LEVELS: tuple[Callable[[Candidate], Any], ...] = (
    lambda c: c.cloud,
    lambda c: (c.cloud, c.region),
    lambda c: (c.cloud, c.region, c.zone),
)


def spread_candidates(candidates: Sequence[Candidate], limit: int = DEFAULT_KEPT) -> list[Candidate]:
    """At most `limit` of `candidates` (best first), spanning clouds, regions and zones; in their order."""
    if len(candidates) <= limit:
        return list(candidates)
    kept: set[int] = {0}  # the optimizer's choice stays first
    for level in _LEVELS:
        seen = {level(candidates[i]) for i in kept}
        for i, candidate in enumerate(candidates):
            if len(kept) >= limit:
                break
            key = level(candidate)
            if key not in seen:
                seen.add(key)
                kept.add(i)
    for i in range(len(candidates)):
        if len(kept) >= limit:
            break
        kept.add(i)
    return [candidates[i] for i in sorted(kept)]
