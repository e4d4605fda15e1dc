"""The orphan reaper: what a cloud runs for skyless that no live job owns is terminated, after a grace period.

Clouds are asked (by tag), not our records: a crash between "VM created" and "VM recorded" leaves a VM our
tables never heard of, and this is what finds it. A cluster is owned when its job exists, is not finished,
and the cluster's attempt is the job's current one (a launched-but-unrecorded cluster of the current
attempt is owned: the redriven launch will find and record it, since launches are idempotent).

The grace period runs from the first sweep that saw a cluster unowned (a mark in the events table, under
the partition `reaper-marks`), so it works the same on clouds that report no launch time. A kill is
recorded once, in the job's timeline, or under the partition `reaper` when the job is gone: the mark's
conditional move from "suspect" to "killed" decides which of two overlapping sweeps writes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, PutError, UpdateError
from pynamodb.models import Model

from shared.clouds.base import CloudProvider, Node
from shared.clouds.errors import CloudError
from shared.config import Settings
from shared.states import is_terminal
from shared.store.models import JobModel, with_shared_session
from shared.wiring import Wiring, current_wiring

DEFAULT_GRACE_SECONDS = 300
MARKS_PARTITION = "reaper-marks"
RECORDS_PARTITION = "reaper"  # kills whose job is gone
log = logging.getLogger(__name__)


class ReaperMark(Model):
    """One cluster seen unowned: since when, and whether it has been killed."""

    class Meta:
        table_name = "unbound-events"

    job_id = UnicodeAttribute(hash_key=True)  # always MARKS_PARTITION
    at = UnicodeAttribute(range_key=True)  # "mark#<provider>#<cluster id>"
    first_seen = NumberAttribute()
    state = UnicodeAttribute()  # "suspect" | "killed"
    owner_job = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)


@cache
def marks_model(settings: Settings) -> type[ReaperMark]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("events"),
            "region": settings.region,
            "host": settings.endpoint_url,
        },
    )
    return with_shared_session(type(f"ReaperMark_{settings.prefix}", (ReaperMark,), {"Meta": meta}))


@dataclass
class SweepReport:
    killed: list[str] = field(default_factory=list)  # cluster ids terminated by this sweep
    in_grace: list[str] = field(default_factory=list)  # unowned, not old enough yet
    owned: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # providers that could not be listed or asked

    def as_dict(self) -> dict[str, list[str]]:
        return {"killed": self.killed, "in_grace": self.in_grace, "owned": self.owned, "failed": self.failed}


def grace_seconds_from_env() -> int:
    return int(os.environ.get("SKYLESS_REAPER_GRACE_SECONDS") or DEFAULT_GRACE_SECONDS)


def attempt_of_cluster(cluster_id: str) -> int | None:
    """Cluster ids are `<job id>-<attempt>`."""
    tail = cluster_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def orphan_reason(job: JobModel | None, cluster_id: str, attempt: int | None) -> str | None:
    """Why a cluster is nobody's (None: a live job owns it)."""
    if job is None:
        return "its job no longer exists"
    if is_terminal(job.state):
        return f"its job is {job.state}"
    attempt = attempt if attempt is not None else attempt_of_cluster(cluster_id)
    if attempt is None:
        return None if job.cluster_id == cluster_id else "it is not its job's cluster"
    if attempt < int(job.attempt):
        return f"attempt {attempt} is older than the job's attempt {int(job.attempt)}"
    return None


def reap_orphans(
    wiring: Wiring | None = None, *, now: float | None = None, grace_seconds: int | None = None
) -> SweepReport:
    """One sweep over every enabled provider."""
    wiring = wiring or current_wiring()
    now = time.time() if now is None else now
    grace = grace_seconds_from_env() if grace_seconds is None else grace_seconds
    marks = marks_model(wiring.settings)
    report = SweepReport()
    jobs: dict[str, JobModel | None] = {}
    for name in sorted(set(wiring.providers.mapping.values())):
        try:
            provider = wiring.providers.build(name)
            clusters = _owned_clusters(provider)
        except CloudError as error:  # one cloud's refusal must not shelter the others' orphans
            log.warning("reaper: cannot list %s: %s", name, error.message)
            report.failed.append(name)
            continue
        prefix = f"mark#{provider.name}#"
        seen_before = marks.query(MARKS_PARTITION, marks.at.startswith(prefix), consistent_read=True)
        known = {mark.at: mark for mark in seen_before}
        for key in set(known) - {prefix + cluster_id for cluster_id in clusters}:
            _forget(marks, key)  # that cluster is gone
        for cluster_id, (job_id, attempt, nodes) in sorted(clusters.items()):
            if job_id not in jobs:
                jobs[job_id] = wiring.store.get(job_id) if job_id else None
            reason = orphan_reason(jobs[job_id], cluster_id, attempt)
            key = prefix + cluster_id
            if reason is None:
                if key in known:
                    _forget(marks, key)  # owned after all (recorded late)
                report.owned.append(cluster_id)
                continue
            mark = known.get(key) or _mark(marks, key, now, job_id, reason)
            if now - float(mark.first_seen) < grace:
                report.in_grace.append(cluster_id)
                continue
            try:
                provider.terminate(cluster_id)
            except CloudError as error:
                log.warning("reaper: cannot terminate %s on %s: %s", cluster_id, provider.name, error.message)
                report.failed.append(provider.name)
                continue
            report.killed.append(cluster_id)
            if _claim_kill(marks, mark):
                _record_kill(wiring, jobs[job_id], job_id, provider.name, cluster_id, reason, nodes)
    return report


def _owned_clusters(provider: CloudProvider) -> dict[str, tuple[str, int | None, list[str]]]:
    """cluster id -> (job id, attempt, instance ids) of everything the provider runs for skyless."""
    found: dict[str, list[Node]] = defaultdict(list)
    for node in provider.list_owned():
        if node.state != "terminated":
            found[node.cluster_id].append(node)
    clusters = {
        cluster_id: (nodes[0].job_id, nodes[0].attempt, [n.instance_id for n in nodes])
        for cluster_id, nodes in found.items()
    }
    leftovers = getattr(provider, "leftover_clusters", None)  # resources left after the instances went
    if leftovers is not None:
        for job_id, cluster_id in leftovers():
            clusters.setdefault(cluster_id, (job_id, attempt_of_cluster(cluster_id), []))
    return clusters


def _mark(marks: type[ReaperMark], key: str, now: float, job_id: str, reason: str) -> ReaperMark:
    mark = marks(MARKS_PARTITION, key, first_seen=now, state="suspect", owner_job=job_id or None)
    mark.reason = reason
    try:
        mark.save(condition=marks.at.does_not_exist())
    except PutError:
        return marks.get(MARKS_PARTITION, key, consistent_read=True)  # seen before: keep its first sighting
    return mark


def _claim_kill(marks: type[ReaperMark], mark: ReaperMark) -> bool:
    """True for the one sweep that moves the mark to "killed" (and so writes the record)."""
    try:
        mark.update(actions=[marks.state.set("killed")], condition=marks.state == "suspect")
    except UpdateError:
        return False
    return True


def _record_kill(
    wiring: Wiring,
    job: JobModel | None,
    job_id: str,
    provider: str,
    cluster_id: str,
    reason: str,
    instances: list[str],
) -> None:
    message = f"reaper terminated cluster {cluster_id} on {provider}: {reason}"
    detail: dict[str, Any] = {"cluster": cluster_id, "provider": provider, "instances": instances}
    if job is not None:
        wiring.store.note(job_id, "reaper", message, detail)
    else:
        wiring.store.note(RECORDS_PARTITION, "reaper", message, {**detail, "job": job_id})


def _forget(marks: type[ReaperMark], key: str) -> None:
    with contextlib.suppress(DeleteError):
        marks(MARKS_PARTITION, key).delete()


def reaper_records(settings: Settings) -> list[dict[str, Any]]:
    """Kills whose job was gone (for operators and tests)."""
    from shared.store.jobs import JobStore

    return [
        {"message": e.message, **(e.detail.as_dict() if e.detail else {})}
        for e in JobStore(settings).timeline(RECORDS_PARTITION)
    ]
