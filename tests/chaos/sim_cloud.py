"""An in-memory cloud with the provider protocol's contracts (launch idempotent per cluster, terminate and
list by tag), capacity outages and transient errors on demand, and preemption. It also keeps the ground
truth the invariants are checked against: which clusters of a job have a running VM, at every change."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.clouds.base import RANK_TAG, LaunchSpec, Node
from shared.clouds.errors import NoCapacityError, TransientCloudError


@dataclass
class SimNode:
    instance_id: str
    spec: LaunchSpec
    rank: int
    running: bool = True

    def as_node(self) -> Node:
        spec = self.spec
        tags = {**spec.tags(), RANK_TAG: str(self.rank)}
        return Node(
            instance_id=self.instance_id,
            cluster_id=spec.cluster_id,
            job_id=spec.job_id,
            ip=f"10.0.{self.rank}.1",
            state="running" if self.running else "terminated",
            cloud=spec.cloud,
            region=spec.region,
            zone=spec.zone,
            instance_type=spec.instance_type,
            use_spot=spec.use_spot,
            tags=tags,
        )

    @property
    def place(self) -> str:
        return "/".join(p for p in (self.spec.cloud, self.spec.region, self.spec.zone) if p)


EXTRA_CLUSTER_SECONDS = 900.0  # how long a job may have an extra cluster booting (docs/architecture.md)


@dataclass
class Monitor:
    """Invariants on the cloud's ground truth, checked at every change: one running task per job; besides
    the cluster running it, at most one extra cluster (made before break: a later attempt's), only booting
    (no task starts on it while an earlier cluster of the job is live), live beside it at most
    EXTRA_CLUSTER_SECONDS. It also counts what the bound was tested on: extras booted, how each ended (the
    job moved onto it: a made-before-break move; or it was let go), and the longest one."""

    clock: Any
    live: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # job -> clusters running
    tasks: dict[str, set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )  # job -> clusters running its task
    attempts: dict[str, int] = field(default_factory=dict)  # cluster -> its attempt
    extra_since: dict[str, float] = field(default_factory=dict)  # job -> when it got a second live cluster
    extra_of: dict[str, str] = field(default_factory=dict)  # job -> the later of its two live clusters
    extra_seconds: float = 0.0  # the longest any job had one
    extra_clusters: int = 0  # times a job had a second live cluster
    moves: int = 0  # ... that ended with the job on the later one alone (the break after the make)
    extras_let_go: int = 0  # ... that ended with the later one gone (cancelled, or left by a crash)
    extra_cluster_too_long: dict[str, list[str]] = field(default_factory=dict)  # job -> the clusters
    extra_ran_task: dict[str, list[str]] = field(default_factory=dict)  # a task began beside an earlier one
    attempt_of: Any = None  # job id -> the job's attempt now (the store's word), for telling the two apart
    unfenced_launches: dict[str, list[str]] = field(default_factory=dict)  # launched beside an earlier one
    three_live_clusters: dict[str, list[str]] = field(default_factory=dict)
    two_running_tasks: dict[str, list[str]] = field(default_factory=dict)
    changes: dict[str, list[tuple[float, str]]] = field(default_factory=lambda: defaultdict(list))  # per job

    def cluster_changed(
        self, job_id: str, cluster_id: str, running: bool, attempt: int | None = None
    ) -> None:
        live = self.live[job_id]
        (live.add if running else live.discard)(cluster_id)
        if attempt is not None:
            self.attempts[cluster_id] = attempt
        now = float(self.clock.now())
        self.changes[job_id].append((now, f"cloud: {cluster_id} {'up' if running else 'gone'}"))
        if running and len(live) > 1 and attempt is not None and self.attempt_of is not None:
            current = self.attempt_of(job_id)  # made before break: launched while the job is still before it
            if current is not None and attempt <= current and job_id not in self.unfenced_launches:
                self.unfenced_launches[job_id] = sorted(live)
        if len(live) > 2 and job_id not in self.three_live_clusters:
            self.three_live_clusters[job_id] = sorted(live)
        if len(live) > 1 and job_id not in self.extra_since:
            self.extra_since[job_id] = now
            self.extra_of[job_id] = max(live, key=lambda c: self.attempts.get(c, -1))
            self.extra_clusters += 1
        elif len(live) <= 1 and job_id in self.extra_since:
            extra = self.extra_of.pop(job_id)
            if live == {extra}:
                self.moves += 1
            else:
                self.extras_let_go += 1
            self._overlap_ended(job_id, now - self.extra_since.pop(job_id), cluster_id)

    def close(self) -> None:
        """At the end of a run: overlaps still under way are judged by their length so far."""
        now = float(self.clock.now())
        for job_id, since in list(self.extra_since.items()):
            self._overlap_ended(job_id, now - since, "")

    def _overlap_ended(self, job_id: str, seconds: float, cluster_id: str) -> None:
        self.extra_seconds = max(self.extra_seconds, seconds)
        if seconds > EXTRA_CLUSTER_SECONDS and job_id not in self.extra_cluster_too_long:
            self.extra_cluster_too_long[job_id] = sorted(self.live[job_id] | {cluster_id} - {""})

    def task_changed(self, job_id: str, cluster_id: str, running: bool) -> None:
        now = float(self.clock.now())
        self.changes[job_id].append((now, f"task: on {cluster_id} {'started' if running else 'ended'}"))
        (self.tasks[job_id].add if running else self.tasks[job_id].discard)(cluster_id)
        if len(self.tasks[job_id]) > 1 and job_id not in self.two_running_tasks:
            self.two_running_tasks[job_id] = sorted(self.tasks[job_id])
        mine = self.attempts.get(cluster_id, -1)
        earlier = [c for c in self.live[job_id] if self.attempts.get(c, -1) < mine]
        if running and earlier and job_id not in self.extra_ran_task:
            self.extra_ran_task[job_id] = sorted([*earlier, cluster_id])


class SimCloud:
    name = "sim"

    def __init__(self, rng: random.Random, monitor: Monitor, transient_rate: float = 0.0) -> None:
        self.rng = rng
        self.monitor = monitor
        self.transient_rate = transient_rate
        self.clusters: dict[str, list[SimNode]] = {}
        self.nodes: dict[str, SimNode] = {}
        self.by_job: dict[str, list[str]] = defaultdict(list)
        self.out_of_capacity: set[str] = set()  # places (cloud/region/zone) with no room now
        self.no_spot: set[str] = set()  # regions (cloud/region) refusing every spot launch now
        self.spot_refused = 0  # spot launches refused for that
        self.refused_beside_live = 0  # launches refused for capacity while the job had a live cluster
        self.launch_requests = 0
        self.fresh: list[SimNode] = []  # launched since the run last booted agents
        self._ids = 0

    # -- the provider protocol -----------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        self.launch_requests += 1
        existing = self.clusters.get(spec.cluster_id)
        if existing is not None:
            return [n.as_node() for n in existing]  # the same attempt again: what it launched
        place = "/".join(p for p in (spec.cloud, spec.region, spec.zone) if p)
        drought = spec.use_spot and f"{spec.cloud}/{spec.region}" in self.no_spot
        if place in self.out_of_capacity or drought:
            self.spot_refused += drought
            self.refused_beside_live += bool(self.monitor.live.get(spec.job_id))
            raise NoCapacityError(f"sim: no {'spot ' if drought else ''}capacity in {place}")
        if self.rng.random() < self.transient_rate:
            raise TransientCloudError(f"sim: throttled in {place}")
        nodes = []
        for rank in range(spec.num_nodes):
            self._ids += 1
            node = SimNode(f"sim-{self._ids:07d}", spec, rank)
            self.nodes[node.instance_id] = node
            nodes.append(node)
        self.fresh.extend(nodes)
        self.clusters[spec.cluster_id] = nodes
        self.by_job[spec.job_id].append(spec.cluster_id)
        self.monitor.cluster_changed(spec.job_id, spec.cluster_id, True, spec.attempt)
        return [n.as_node() for n in nodes]

    def terminate(self, cluster_id: str) -> None:
        for node in self.clusters.get(cluster_id, []):
            self.kill(node)

    def describe(self, cluster_id: str) -> list[Node]:
        return [n.as_node() for n in self.clusters.get(cluster_id, [])]

    def list_owned(self) -> list[Node]:
        return [n.as_node() for n in self.nodes.values()]

    def list_job(self, job_id: str) -> list[Node]:
        return [n.as_node() for c in self.by_job.get(job_id, []) for n in self.clusters[c]]

    # -- what the chaos does -------------------------------------------------------------------

    def kill(self, node: SimNode) -> None:
        if not node.running:
            return
        node.running = False
        cluster = self.clusters[node.spec.cluster_id]
        if not any(n.running for n in cluster):  # its task, if it ran one, ended with the last VM
            self.monitor.task_changed(node.spec.job_id, node.spec.cluster_id, False)
            self.monitor.cluster_changed(node.spec.job_id, node.spec.cluster_id, False)

    def preemption_event(self, node: SimNode) -> dict[str, Any]:
        """Reclaim a spot node; the EventBridge spot warning the cloud sends about it."""
        self.kill(node)
        return {
            "version": "0",
            "id": f"evt-{node.instance_id}",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": datetime.fromtimestamp(self.monitor.clock.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": node.spec.region,
            "resources": [],
            "detail": {"instance-id": node.instance_id, "instance-action": "terminate"},
        }

    def running_spot_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.running and n.spec.use_spot]

    def running_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.running]


class SimRegistry:
    """The provider registry's face, every cloud served by the (fault-injected) simulated cloud."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.mapping = {"*": "sim"}

    def provider_for(self, cloud: str) -> Any:
        return self.provider

    def build(self, name: str) -> Any:
        return self.provider

    def provider_name(self, cloud: str) -> str | None:
        return "sim"

    def served_clouds(self) -> set[str] | None:
        return None

    def all_providers(self) -> list[Any]:
        return [self.provider]

    def usable_providers(self) -> list[Any]:
        return [self.provider]
