"""What each provider delivered, per cloud, region and instance family, from the timelines skyless keeps.

Pure: plain records in (each job's cluster records and timeline events), a scorecard out.

- Launch requests: every launch that succeeded (a cluster record) and every refused one (a `refused` note,
  written by the plan's walk, the deadline policy's and make before break's launches with the cloud's error
  kind: `no capacity`, `quota`, `auth`, `transient`).
- Time to RUNNING: from a cluster's launch to the job's first RUNNING event while that cluster was its own
  (the first attempt that no move to RECOVERING has ended yet).
- Preemptions: moves to RECOVERING whose detail says `preempted`, counted on the cluster they took;
  `warned` are those that came with a notice (a cloud's spot warning or the node's metadata notice), the
  rest were found after the node was gone (the reconcile sweep). Per spot-hour: over node-hours on spot.
- Node failures: moves to RECOVERING neither preempted nor the task's own failure (a lost on-demand node),
  and jobs failed for a silent node.
- Cost against list: what the attempts cost at their planned price, against the catalog's on-demand list
  price for the same place and hours (shared/jobs/cost_report.py prices both).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.catalog.model import Catalog
from shared.jobs.cost_report import ClusterRecord, JobRecord, attempt_cost
from shared.optimizer.plan import instance_family_of

CAPACITY = "no capacity"


@dataclass(frozen=True)
class TimelineEvent:
    at: float
    kind: str  # "state" | "note" | "refused" | ...
    state: str | None
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobHistory:
    job: JobRecord
    clusters: tuple[ClusterRecord, ...]
    events: tuple[TimelineEvent, ...]


@dataclass
class ProviderLine:
    """One place's record: `key` is (cloud, region, instance family)."""

    cloud: str
    region: str
    family: str
    launch_requests: int = 0
    launches: int = 0
    capacity_refusals: int = 0
    other_refusals: int = 0
    seconds_to_running: list[float] = field(default_factory=list)
    spot_hours: float = 0.0
    preemptions: int = 0
    warned_preemptions: int = 0
    node_failures: int = 0
    cost: float = 0.0
    list_cost: float = 0.0
    list_known: bool = True

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cloud, self.region, self.family)

    @property
    def refusal_rate(self) -> float:
        refused = self.capacity_refusals + self.other_refusals
        return round(refused / self.launch_requests, 4) if self.launch_requests else 0.0

    @property
    def median_seconds_to_running(self) -> float | None:
        return round(statistics.median(self.seconds_to_running), 1) if self.seconds_to_running else None

    @property
    def max_seconds_to_running(self) -> float | None:
        return round(max(self.seconds_to_running), 1) if self.seconds_to_running else None

    @property
    def preemptions_per_spot_hour(self) -> float | None:
        return round(self.preemptions / self.spot_hours, 4) if self.spot_hours > 0 else None

    @property
    def percent_of_list(self) -> float | None:
        """What was paid as a share of list price (100: list; 35: 65 % below it); None with no list price."""
        if not self.list_known or self.list_cost <= 0:
            return None
        return round(100.0 * self.cost / self.list_cost, 1)


@dataclass(frozen=True)
class Scorecard:
    since: float
    until: float
    days: int
    all_users: bool
    jobs_read: int
    lines: list[ProviderLine]


def _line(
    lines: dict[tuple[str, str, str], ProviderLine], cloud: str, region: str, itype: str
) -> ProviderLine:
    family = instance_family_of(itype) if itype else "?"
    key = (cloud, region, family)
    if key not in lines:
        lines[key] = ProviderLine(cloud=cloud, region=region, family=family)
    return lines[key]


def _is_preemption(event: TimelineEvent, cluster: ClusterRecord) -> bool:
    said = event.detail.get("preempted")
    if said is not None:
        return bool(said)
    # events written before the flag existed: a spot cluster lost to a notice or a preemption
    text = event.message.lower()
    return cluster.use_spot and ("preempt" in text or "interruption" in text)


def _current(clusters: list[ClusterRecord], ended: set[str]) -> ClusterRecord | None:
    """The job's cluster now: its first attempt that no RECOVERING event has ended yet."""
    return next((c for c in clusters if c.cluster_id not in ended), None)


def build_scorecard(
    histories: Iterable[JobHistory],
    catalog: Catalog,
    *,
    since: float,
    now: float,
    days: int,
    all_users: bool = False,
) -> Scorecard:
    lines: dict[tuple[str, str, str], ProviderLine] = {}
    read = 0
    for history in histories:
        read += 1
        clusters = sorted(history.clusters, key=lambda c: (c.attempt, c.launched_at))
        by_id = {c.cluster_id: c for c in clusters}
        for cluster in clusters:
            line = _line(lines, cluster.cloud, cluster.region, cluster.instance_type)
            line.launch_requests += 1
            line.launches += 1
            cost = attempt_cost(history.job, cluster, catalog, now)
            line.cost += cost.cost
            line.list_cost += cost.on_demand_cost
            line.list_known = line.list_known and cost.on_demand_known
            if cluster.use_spot:
                line.spot_hours += cost.hours * cluster.num_nodes
        running_seen: set[str] = set()
        ended: set[str] = set()
        for event in sorted(history.events, key=lambda e: e.at):
            if event.kind == "refused":
                d = event.detail
                line = _line(
                    lines,
                    str(d.get("cloud", "?")),
                    str(d.get("region", "?")),
                    str(d.get("instance_type", "")),
                )
                line.launch_requests += 1
                if str(d.get("error", "")) == CAPACITY:
                    line.capacity_refusals += 1
                else:
                    line.other_refusals += 1
                continue
            if event.kind != "state":
                continue
            cluster_id = event.detail.get("cluster")
            if event.state == "RUNNING":
                owner = _current(clusters, ended)
                if owner is not None and owner.cluster_id not in running_seen:
                    running_seen.add(owner.cluster_id)
                    line = _line(lines, owner.cloud, owner.region, owner.instance_type)
                    line.seconds_to_running.append(max(0.0, event.at - owner.launched_at))
            elif event.state == "RECOVERING" and cluster_id in by_id:
                cluster = by_id[str(cluster_id)]
                ended.add(cluster.cluster_id)
                line = _line(lines, cluster.cloud, cluster.region, cluster.instance_type)
                if _is_preemption(event, cluster):
                    line.preemptions += 1
                    line.warned_preemptions += 1 if event.detail.get("warned") else 0
                elif not event.detail.get("restart"):
                    line.node_failures += 1
            elif event.state == "FAILED" and event.detail.get("node_failure") and cluster_id in by_id:
                cluster = by_id[str(cluster_id)]
                _line(lines, cluster.cloud, cluster.region, cluster.instance_type).node_failures += 1
    for line in lines.values():
        line.cost = round(line.cost, 6)
        line.list_cost = round(line.list_cost, 6)
        line.spot_hours = round(line.spot_hours, 6)
    ordered = sorted(lines.values(), key=lambda x: (-x.launch_requests, x.key))
    return Scorecard(since=since, until=now, days=days, all_users=all_users, jobs_read=read, lines=ordered)
