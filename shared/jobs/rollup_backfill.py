"""Cost rollups for a stack made before them: one Scan of the clusters table adds each ended attempt's cost to
the rollups (shared/store/cost_rollups.py), so reports over days before the upgrade keep their figures.

Idempotent and safe beside the live path: each group of an attempt's days is written in a transaction with
its marker, written only if absent (the last group's is the cluster record's `rolled_up` flag, as the live
path sets it; a stack from before the flag has an `end` marker item instead, checked too); an attempt the live
path ended already has its markers, so it is skipped, and a second run (or one after a crash) adds nothing
twice. When a run completes, a marker of its own says so,
and `create_stack` (the local runtime at every `local up`) then reads no history here. A deployed stack runs
it once with the functions' environment and credentials: `python -m shared.jobs.rollup_backfill`.
"""

from __future__ import annotations

import time

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from shared.config import Settings
from shared.jobs.costs import on_demand_price
from shared.store.cost_rollup_items import add_pieces, marker, rollup_model
from shared.store.cost_rollups import DONE_PREFIX, END_MARK, AttemptFacts, cluster_pieces, write_groups
from shared.store.jobs import _is_condition_failure
from shared.store.models import models_for
from shared.wiring import wiring_for

BACKFILL_KEY = ("costs#backfill", "done")


def backfill_rollups(settings: Settings, *, always: bool = False) -> int:
    """Add the ended attempts no rollup counts yet; returns how many were added (0 once a run has completed,
    unless `always`)."""
    model = rollup_model(settings)
    if not always and _backfilled(settings):
        return 0
    models, wiring, now = models_for(settings), wiring_for(settings), time.time()
    clusters = models.clusters
    expires = int(now + settings.retention_seconds)
    added = 0
    owners: dict[str, str] = {}
    for cluster in clusters.scan((clusters.state == "TERMINATED") & clusters.launched_at.exists()):
        if cluster.terminated_at is None or cluster.rolled_up:
            continue
        if cluster.job_id not in owners:
            job = wiring.store.get(cluster.job_id)
            owners[cluster.job_id] = job.owner if job is not None else "unknown"
        earlier_ids = [f"{cluster.job_id}-{n}" for n in range(int(cluster.attempt))]
        first = not earlier_ids or not wiring.store.clusters_by_id(earlier_ids)
        facts = AttemptFacts(owners[cluster.job_id], on_demand_price(wiring, cluster), first)
        earlier, last = write_groups(cluster_pieces(cluster, facts, float(cluster.terminated_at)))
        groups = [(group[0].day, group) for group in earlier] + [(END_MARK, last)]
        for mark, group in groups:
            try:
                with TransactWrite(connection=models.connection) as tx:
                    if mark == END_MARK:  # the cluster's own flag, as the live path sets it
                        unflagged = clusters.cluster_id.exists() & clusters.rolled_up.does_not_exist()
                        tx.update(cluster, [clusters.rolled_up.set(True)], condition=unflagged)
                        # a stack whose live path marked the end with an item (before the flag) has it
                        legacy = DONE_PREFIX + cluster.cluster_id
                        tx.condition_check(model, legacy, END_MARK, condition=model.job_id.does_not_exist())
                    else:
                        done = marker(model, cluster.cluster_id, mark, expires)
                        tx.save(done, condition=model.job_id.does_not_exist())
                    add_pieces(tx, model, group)
            except TransactWriteError as error:
                if not _is_condition_failure(error):
                    raise
                continue
            added += mark == END_MARK
    model(job_id=BACKFILL_KEY[0], at=BACKFILL_KEY[1]).save()
    return added


def _backfilled(settings: Settings) -> bool:
    try:
        rollup_model(settings).get(*BACKFILL_KEY, consistent_read=True)
    except DoesNotExist:
        return False
    return True


if __name__ == "__main__":
    print({"attempts_added": backfill_rollups(Settings.from_env(), always=True)})
