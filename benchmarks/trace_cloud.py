"""The cloud of `benchmarks/spot_control_plane.py`: spot capacity per zone from a spot trace (all or
nothing for a cluster of N nodes), preemptions when a zone's capacity falls below what its clusters hold,
and every node charged from launch to termination at its market's price."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from chaos.clock import SimClock
from chaos.sim_cloud import Monitor, SimCloud, SimNode, SimRegistry

from shared.clouds.base import LaunchSpec, Node
from shared.clouds.errors import NoCapacityError

HOUR = 3600.0


@dataclass(frozen=True)
class ZoneTrace:
    zone: str
    gap: float
    counts: tuple[int, ...]

    @property
    def region(self) -> str:
        return self.zone[:-1] if self.zone[-1].isalpha() else self.zone

    @cached_property
    def most(self) -> int:
        return max(self.counts)

    def spot_for(self, nodes: int, tick: int) -> bool:
        """All or nothing: the zone has spot for `nodes` at `tick` (past the end, the trace starts over)."""
        need = max(1, min(nodes, self.most))
        return self.counts[tick % len(self.counts)] >= need


def load_zone_trace(path: Path) -> ZoneTrace:
    body = json.loads(path.read_text())
    return ZoneTrace(
        path.stem.split("_")[0], float(body["metadata"]["gap_seconds"]), tuple(int(v) for v in body["data"])
    )


@dataclass
class Prices:
    on_demand: float  # $/h per node
    spot: float


class TraceCloud(SimCloud):
    """SimCloud whose spot capacity follows the traces and which charges every node it ran."""

    def __init__(
        self, traces: list[ZoneTrace], clock: SimClock, start_hours: float, prices: Prices, monitor: Monitor
    ) -> None:
        super().__init__(random.Random(0), monitor)
        self.traces = {t.zone: t for t in traces}
        self.clock = clock
        self.t0 = clock.now()
        self.start_seconds = start_hours * HOUR
        self.prices = prices
        self.dollars = 0.0
        self.started: dict[str, float] = {}  # instance id -> launched at
        self.ended: dict[str, float] = {}  # instance id -> terminated at
        self.launched = 0
        self.refused = 0

    def tick(self, zone: str, at: float | None = None) -> int:
        trace = self.traces[zone]
        at = self.clock.now() if at is None else at
        return int((self.start_seconds + at - self.t0) // trace.gap)

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if spec.cluster_id not in self.clusters and spec.use_spot:
            trace = self.traces.get(spec.zone or "")
            if trace is None or not trace.spot_for(spec.num_nodes, self.tick(trace.zone)):
                self.launch_requests += 1
                self.refused += 1
                raise NoCapacityError(f"trace: no spot for {spec.num_nodes} node(s) in {spec.zone}")
        fresh = spec.cluster_id not in self.clusters
        nodes = super().launch(spec)
        if fresh:
            self.launched += 1
            for node in self.clusters[spec.cluster_id]:
                self.started[node.instance_id] = self.clock.now()
        return nodes

    def kill(self, node: SimNode) -> None:
        if node.running:
            price = self.prices.spot if node.spec.use_spot else self.prices.on_demand
            self.dollars += price * (self.clock.now() - self.started[node.instance_id]) / HOUR
            self.ended[node.instance_id] = self.clock.now()
        super().kill(node)
        self.on_kill(node)

    def on_kill(self, node: SimNode) -> None:
        """The run ends the node's task here: a VM gone takes its task with it."""

    def clusters_to_preempt(self) -> list[str]:
        """Running spot clusters whose zone no longer has room for them."""
        doomed = []
        for cluster_id, nodes in self.clusters.items():
            spec = nodes[0].spec
            if spec.use_spot and any(n.running for n in nodes):
                trace = self.traces[spec.zone or ""]
                if not trace.spot_for(spec.num_nodes, self.tick(trace.zone)):
                    doomed.append(cluster_id)
        return doomed


class TraceRegistry(SimRegistry):
    """Every cloud served by the trace cloud (a task that pins a cloud asks for its provider's name)."""

    def provider_name(self, cloud: str) -> str | None:
        return "sim"
