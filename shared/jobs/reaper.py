"""The orphan reaper: what a cloud runs for skyless that no live job owns is terminated, after a grace period.

Clouds are asked (by tag), not our records: a crash between "VM created" and "VM recorded" leaves a VM our
tables never heard of, and this is what finds it. A cluster is owned when its job exists, is not finished,
and the cluster's attempt is the job's current one (a launched-but-unrecorded cluster of the current
attempt is owned: the redriven launch will find and record it, since launches are idempotent).

The grace period runs from the first sweep that saw a cluster unowned (a mark in the events table, under
the partition `reaper-marks`: `wiring.reaper_marks`, shared/store/reaper_marks.py), so it works the same
on clouds that report no launch time. A kill is recorded once, in the job's timeline, or under the partition
`reaper` when the job is gone: the mark's conditional move from "suspect" to "killed" decides which of two
overlapping sweeps writes it.

Clusters are looked at in a random order: a sweep that dies part-way leaves different ones for the next
sweep, never the same tail (at scale, with the chaos run's crashes, no sweep got through the whole list).
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from shared.clouds.base import CloudProvider, Node
from shared.clouds.errors import CloudError
from shared.config import Settings
from shared.config.control_plane import ReaperConfig
from shared.states import is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring, current_wiring, wiring_for

DEFAULT_GRACE_SECONDS = ReaperConfig.grace_seconds
RECORDS_PARTITION = "reaper"  # kills whose job is gone
NAMED_CLUSTER_PREFIX = "cl-"  # shared/clusters/names.py: KEY_PREFIX
log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    killed: list[str] = field(default_factory=list)  # cluster ids terminated by this sweep
    in_grace: list[str] = field(default_factory=list)  # unowned, not old enough yet
    owned: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # providers that could not be listed or asked

    def as_dict(self) -> dict[str, list[str]]:
        return {"killed": self.killed, "in_grace": self.in_grace, "owned": self.owned, "failed": self.failed}


def grace_seconds_from_env() -> int:
    return ReaperConfig.from_env().grace_seconds


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


def is_named_cluster(job_tag: str | None) -> bool:
    """Nodes of a named cluster carry its key (`cl-…`) where a job's carry the job id (`job-…`)."""
    return bool(job_tag) and str(job_tag).startswith(NAMED_CLUSTER_PREFIX)


def named_cluster_orphan_reason(settings: Settings, key: str, cluster_id: str) -> str | None:
    """Why a named cluster's nodes are nobody's (None: the cluster holds them, in any state but
    TERMINATED: a STOPPED cluster's nodes are its own)."""
    from shared.store.cluster_records import ClusterStore

    if ClusterStore(settings).holds_nodes(key, cluster_id):
        return None
    return f"named cluster {key} no longer holds {cluster_id}"


def reap_orphans(
    wiring: Wiring | None = None, *, now: float | None = None, grace_seconds: int | None = None
) -> SweepReport:
    """One sweep over every enabled provider."""
    wiring = wiring or current_wiring()
    now = time.time() if now is None else now
    grace = grace_seconds_from_env() if grace_seconds is None else grace_seconds
    marks = wiring.reaper_marks
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
        known = marks.of_provider(provider.name)
        for gone in set(known) - set(clusters):
            marks.forget(provider.name, gone)  # that cluster is gone
        for cluster_id, (job_id, attempt, nodes) in random.sample(sorted(clusters.items()), len(clusters)):
            if job_id not in jobs:
                jobs[job_id] = wiring.store.get(job_id) if job_id else None
            reason = orphan_reason(jobs[job_id], cluster_id, attempt)
            if is_named_cluster(job_id):  # a named cluster's nodes: STOPPED ones are still its own
                reason = named_cluster_orphan_reason(wiring.settings, job_id, cluster_id)
            if reason is None:
                if cluster_id in known:
                    marks.forget(provider.name, cluster_id)  # owned after all (recorded late)
                report.owned.append(cluster_id)
                continue
            mark = known.get(cluster_id) or marks.mark(provider.name, cluster_id, now=now, job_id=job_id,
                                                       reason=reason)  # fmt: skip
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
            if marks.claim_kill(mark):  # one of two overlapping sweeps records the kill
                _record_kill(wiring, jobs[job_id], job_id, provider.name, cluster_id, reason, nodes)
    for found in (report.killed, report.in_grace, report.owned):
        found.sort()  # what the sweep did, in a stable order (it went through them at random)
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


def reaper_records(settings: Settings) -> list[dict[str, Any]]:
    """Kills whose job was gone (for operators and tests)."""
    return [
        {"message": e.message, **(e.detail.as_dict() if e.detail else {})}
        for e in wiring_for(settings).store.timeline(RECORDS_PARTITION)
    ]
