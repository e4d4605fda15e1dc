"""At most one live cluster per job: an attempt launches only once its job's earlier clusters are gone.

A recovery, an error restart or a pipeline's next step bumps the job's attempt and asks, on separate
messages, for the old cluster's teardown and a new launch; the queue may deliver them in any order, twice,
or lose one to a crash. So the launch does not trust the teardown: before an attempt's first candidate is
tried, the provision step itself terminates everything the job's earlier attempts own, found two ways,
because either may be missing something:

- every cluster record of an earlier attempt (cluster ids are `<job id>-<attempt>`, read in one batch);
- every node the clouds list as the job's (by tag), whose cluster is not this attempt's: a launch that
  crashed before it was recorded leaves VMs only the cloud knows of.

Each is terminated on its provider (idempotent: terminating what is gone is a no-op), then asked for again:
a node still listed as running means the cloud has not let go yet, and the launch waits (a short delayed
message) rather than start a second cluster. Agents of an earlier attempt are refused with an explicit
stop (shared.api.auth.StaleAttemptError, HTTP 410): they kill their task's process group and exit.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from shared.clouds.base import CloudProvider, Node
from shared.clouds.errors import CloudError
from shared.jobs.costs import end_cluster
from shared.jobs.messages import cluster_id_for
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring

logger = logging.getLogger("skyless.fencing")

FENCE_RETRY_SECONDS = 5  # a cloud that has not let go of a node yet is asked again this much later


@dataclass
class FenceReport:
    terminated: list[str] = field(default_factory=list)  # earlier clusters this step found running
    still_running: list[str] = field(default_factory=list)  # ... and the cloud still lists as running
    unreachable: list[str] = field(default_factory=list)  # providers that could not be asked
    records: list[ClusterModel] = field(default_factory=list)  # records of the clusters terminated, still UP

    @property
    def fenced(self) -> bool:
        """True when no earlier attempt of the job can still be running anything."""
        return not self.still_running and not self.unreachable

    def write_down(self, wiring: Wiring, job_id: str, attempt: int) -> None:
        """Mark the terminated clusters' records and say so in the timeline. Done after the launch (the
        records are bookkeeping, the cloud's answer was the check); lost to a crash, reconcile does it."""
        by_id = {r.cluster_id: r for r in self.records}
        for cluster_id in self.terminated:
            record = by_id.get(cluster_id)
            if cluster_id in self.still_running:
                continue
            if record is None or end_cluster(wiring, record):
                message = f"cluster {cluster_id} terminated before attempt {attempt} launches"
                wiring.store.note(job_id, "fence", message, {"cluster": cluster_id})


def job_nodes(provider: CloudProvider, job_id: str) -> list[Node]:
    """The nodes a provider lists as the job's (by tag). A provider may answer this directly
    (`list_job`); otherwise its whole listing is filtered."""
    listing = getattr(provider, "list_job", None)
    if callable(listing):
        return list(listing(job_id))
    return [n for n in provider.list_owned() if n.job_id == job_id]


def fence_earlier_attempts(wiring: Wiring, job: JobModel) -> FenceReport:
    """Terminate every cluster of `job`'s earlier attempts and check that none is still running.
    Idempotent; a job on its first attempt has nothing to fence and costs no call."""
    report = FenceReport()
    attempt = int(job.attempt)
    if attempt == 0:
        return report
    current = cluster_id_for(job.job_id, attempt)
    owners: dict[str, set[str]] = defaultdict(set)  # cluster id -> provider names that may run it
    records = {}
    earlier = (cluster_id_for(job.job_id, a) for a in range(attempt))
    for record in wiring.store.clusters_by_id(earlier).values():
        records[record.cluster_id] = record
        if record.state == "UP":
            owners[record.cluster_id].add(record.provider)
    providers = wiring.providers.usable_providers()
    for provider in providers:
        try:
            listed = job_nodes(provider, job.job_id)
        except CloudError as error:
            logger.warning("fence %s: %s cannot list: %s", job.job_id, provider.name, error)
            report.unreachable.append(provider.name)
            continue
        for node in listed:
            if node.state == "running" and node.cluster_id != current:
                owners[node.cluster_id].add(provider.name)
    by_name = {p.name: p for p in providers}
    for cluster_id, names in sorted(owners.items()):
        for name in sorted(names):
            provider = by_name.get(name) or wiring.providers.build(name)
            try:
                provider.terminate(cluster_id)
                alive = [n for n in provider.describe(cluster_id) if n.state == "running"]
            except CloudError as error:
                logger.warning("fence %s: %s cannot terminate %s: %s", job.job_id, name, cluster_id, error)
                report.unreachable.append(name)
                continue
            if alive:
                report.still_running.append(cluster_id)
        report.terminated.append(cluster_id)
        if cluster_id in records:
            report.records.append(records[cluster_id])
    return report
