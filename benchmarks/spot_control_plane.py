"""`benchmarks/spot_policy.py --control-plane`: one job per start point through the real control plane (the
optimize, provision and spot_watch Lambda handlers, fed SQS event records; the real deadline checks,
recovery, make-before-break and fencing; the memory job store) against a cloud whose spot capacity follows
spot traces, one zone per trace file, in simulated time (tests/chaos/clock.py: `time.time` runs ahead, no
sleeping).

The cloud: a spot launch of N nodes in a zone is refused unless the zone's trace has N available at that
moment (all or nothing; a 1-node trace's 1 is read as "the zone has spot" for any N); when a zone's
available count falls below what its running clusters hold, they are preempted (every node reclaimed, the
EC2 spot warning sent to spot_watch). On-demand is never refused. Each node is charged from launch to
termination at its market's price, so what is charged is what the clusters really ran.

The agents: a launched cluster's agent fetches its config (waiting, as the real agent does, while the
control plane answers "not yet" to a cluster made before the break), reports setting_up and running, and
the task makes progress `restart hours` after the cluster's launch, keeping what it did across clusters
(checkpoints). When the job's work is done the agent reports success and the control plane tears the
cluster down.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.clock import SimClock
from chaos.memory_objects import MemoryObjects
from chaos.sim_cloud import Monitor, SimNode
from spot_peers import PEERS, deciding_with
from trace_cloud import Prices, TraceCloud, TraceRegistry, ZoneTrace

from shared.api.auth import AuthError, StaleAttemptError, authenticate_boot
from shared.budgets.records import MemoryBudgets
from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.config import Settings
from shared.errors import NotFoundError
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.node_claims import first_config
from shared.jobs.submission import SubmitJob, new_job_id, submit_job
from shared.jobs.tokens import boot_token
from shared.spot_policy import (
    AvailabilityTrace,
    PlaceOption,
    decide,
    decide_greedy,
    decide_spot_only,
    optimal_cost,
    replay,
)
from shared.states import JobState, is_terminal
from shared.store.memory import MemoryJobStore
from shared.wiring import Wiring, install_wiring, uninstall_wiring, wiring_for

HOUR = 3600.0
DEFAULT_TRACES = Path(__file__).resolve().parent.parent.parent / "shared" / "spot-traces"
INSTANCE_TYPE = "p3.2xlarge"
NOWHERE = "http://127.0.0.1:9"
BOOT_RETRY_SECONDS = 10.0
FAR_DEADLINE = 50  # x the work: a deadline that never binds, for a peer that knows none


@dataclass
class RunResult:
    start_hours: float
    cost: float  # relative to all on-demand: one launch, (work + restart) hours
    finished_hours: float | None  # after the start; None: not finished
    missed: bool
    launches: int  # launches that obtained nodes
    refused: int  # spot launches refused for capacity
    preemptions: int  # clusters reclaimed
    state: str
    two_running_tasks: int = 0
    dollars: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "start_hours": self.start_hours,
            "cost": round(self.cost, 4),
            "finished_hours": None if self.finished_hours is None else round(self.finished_hours, 3),
            "missed": self.missed,
            "launches": self.launches,
            "refused": self.refused,
            "preemptions": self.preemptions,
        }


class _FixedCatalog:
    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def catalog(self) -> Catalog:
        return self._catalog


@dataclass
class Agent:
    cluster_id: str
    job_id: str
    attempt: int
    launched_at: float
    node: SimNode  # one agent per node, as on a real cluster
    phase: str = "boot"  # boot -> run -> gone


@dataclass
class Job:
    work: float  # seconds of compute
    overhead: float
    done: float = 0.0  # seconds of compute kept (checkpointed) from ended clusters


@dataclass
class ControlPlaneRun:
    traces: list[ZoneTrace]
    nodes: int
    work_hours: float
    deadline_hours: float | None
    restart_hours: float
    start_hours: float
    prices: Prices
    policy: str = "skyless"  # or a peer of spot_peers.PEERS, answering for skyless's decide
    clock: SimClock = field(default_factory=lambda: SimClock(detached=True))

    def __post_init__(self) -> None:
        self.monitor = Monitor(self.clock)
        self.cloud = TraceCloud(self.traces, self.clock, trace_start(self.traces, self.start_hours) / HOUR,
                                self.prices, self.monitor)  # fmt: skip
        self.agenda: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.agents: dict[str, Agent] = {}  # instance id -> its agent
        self.preemptions = 0
        self.errors: list[str] = []
        self.job = Job(self.work_hours * HOUR, self.restart_hours * HOUR)
        self.cloud.on_kill = self._node_gone  # type: ignore[method-assign]

    def _node_gone(self, node: SimNode) -> None:
        agent = self.agents.get(node.instance_id)
        if agent is not None:
            self._end(self.job, agent)

    # -- the stack -----------------------------------------------------------------------------

    def _settings(self, home: Path) -> Settings:
        """The product's settings from this environment (SKYLESS_SPOT_REFUSALS_PER_HOUR,
        SKYLESS_DEADLINE_RETRY_SECONDS ... as a deployment sets them), wired to the simulated stack."""
        return Settings.from_env(os.environ).with_(
            prefix=f"b{uuid.uuid4().hex[:10]}",
            region="us-east-1",
            endpoint_url=NOWHERE,
            home=home,
            providers="*=sim",
            api_url=NOWHERE,
            restart_overhead_seconds=round(self.restart_hours * HOUR),
        )

    def _catalog(self) -> Catalog:
        return Catalog(
            [
                Offering(
                    "aws",
                    t.region,
                    t.zone,
                    INSTANCE_TYPE,
                    "V100",
                    1,
                    16,
                    8,
                    61,
                    self.prices.on_demand,
                    self.prices.spot,
                )
                for t in self.traces
            ],
            sources=["traces"],
        )

    def _send(self, kind: str, body: dict[str, Any], delay_seconds: int = 0) -> None:
        self.at(self.clock.now() + max(0, delay_seconds), "message", (kind, json.loads(json.dumps(body))))

    def at(self, due: float, kind: str, payload: Any = None) -> None:
        heapq.heappush(self.agenda, (due, next(self.seq), kind, payload))

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> RunResult:
        with tempfile.TemporaryDirectory() as home:
            settings = self._settings(Path(home))
            saved = dict(os.environ)
            os.environ.update(settings.to_env())
            os.environ.update(
                {
                    "AWS_ACCESS_KEY_ID": "bench",
                    "AWS_SECRET_ACCESS_KEY": "bench",
                    "SKYLESS_AGENT_SECRET": "bench-agent-secret",
                }
            )
            store = MemoryJobStore()
            queues = _Queues(self._send)
            wiring = Wiring(
                settings,
                store,
                queues,  # type: ignore[arg-type]
                MemoryObjects(),
                TraceRegistry(self.cloud),
                store.cooldowns,
                budget_records=MemoryBudgets(),
            )
            wiring.__dict__["catalog_loader"] = _FixedCatalog(self._catalog())
            install_wiring(wiring)
            try:
                with self.clock.installed(), deciding_with(self.policy):
                    return self._run(settings, store)
            finally:
                uninstall_wiring(settings)
                os.environ.clear()
                os.environ.update(saved)

    def _run(self, settings: Settings, store: MemoryJobStore) -> RunResult:
        t0 = self.clock.now()
        job_state = self.job
        task = f"name: bench\nnum_nodes: {self.nodes}\nresources:\n  cloud: aws\n"
        task += f"  instance_type: {INSTANCE_TYPE}\n"
        task += "  use_spot: true\nrun: python train.py\n"
        options: dict[str, Any] = {}
        deadline = self.deadline_hours
        if deadline is None and self.policy != "skyless":  # a peer answers on the deadline path: far away
            deadline = FAR_DEADLINE * self.work_hours
        if deadline is not None:
            options = {"deadline": f"{deadline * HOUR:.0f}s", "hours": self.work_hours}
        job_id = new_job_id()
        submit_job(
            wiring_for(settings), SubmitJob.from_text(owner="bench", task_text=task, job_id=job_id, **options)
        )
        for trace in self.traces:
            self.at(self._next_tick_at(trace), "tick", trace.zone)
        limit = t0 + 4 * max(self.deadline_hours or 0, self.work_hours) * HOUR + 48 * HOUR
        finished_at: float | None = None
        while self.agenda and self.clock.now() < limit:
            due, _, kind, payload = heapq.heappop(self.agenda)
            self.clock.advance(due - self.clock.now())
            if kind == "message":
                self._deliver(*payload)
            elif kind == "tick":
                self._preempt_lost_zones()
                self.at(self._next_tick_at(self.cloud.traces[payload]), "tick", payload)
            elif kind == "agent":
                self._agent_step(settings, job_state, payload)
            self._boot_new_nodes()
            job = store.get(job_id)
            if job is not None and is_terminal(job.state):
                if finished_at is None:  # when it ended, not when the checks it had asked for came
                    finished_at = self.clock.now()
                if not self._messages_waiting() and not any(n.running for n in self.cloud.nodes.values()):
                    break
        job = store.get(job_id)
        state = job.state if job is not None else "LOST"
        for node in self.cloud.running_nodes():  # left running: charged until now, and said
            self.errors.append(f"{node.instance_id} still running at the end")
            self.cloud.kill(node)
        finished = (finished_at - t0) / HOUR if state == JobState.SUCCEEDED and finished_at else None
        all_on_demand = self.prices.on_demand * self.nodes * (self.work_hours + self.restart_hours)
        missed = finished is None or (
            self.deadline_hours is not None and finished > self.deadline_hours + 1e-6
        )
        return RunResult(
            start_hours=self.start_hours,
            cost=self.cloud.dollars / all_on_demand,
            finished_hours=finished,
            missed=missed,
            launches=self.cloud.launched,
            refused=self.cloud.refused,
            preemptions=self.preemptions,
            state=str(state),
            two_running_tasks=len(self.monitor.two_running_tasks),
            dollars=self.cloud.dollars,
        )

    def _next_tick_at(self, trace: ZoneTrace) -> float:
        return self.cloud.t0 + (self.cloud.tick(trace.zone) + 1) * trace.gap - self.cloud.start_seconds + 1e-3

    def _messages_waiting(self) -> bool:
        return any(kind == "message" for _, _, kind, _ in self.agenda)

    def _deliver(self, kind: str, body: dict[str, Any]) -> None:
        from functions.optimize.handler import handler as optimize
        from functions.provision.handler import handler as provision
        from functions.spot_watch.handler import handler as spot_watch

        handler = {
            "optimize": optimize,
            "provision": provision,
            "teardown": provision,
            "spot_watch": spot_watch,
        }[kind]
        record = {
            "messageId": uuid.uuid4().hex,
            "receiptHandle": uuid.uuid4().hex,
            "body": json.dumps(body),
            "attributes": {"ApproximateReceiveCount": "1"},
            "eventSource": "aws:sqs",
        }
        answer = handler({"Records": [record]}, None)
        if answer.get("batchItemFailures"):  # SQS delivers it again after the visibility timeout
            self.at(self.clock.now() + 30, "message", (kind, body))

    def _preempt_lost_zones(self) -> None:
        for cluster_id in self.cloud.clusters_to_preempt():
            self.preemptions += 1
            for node in self.cloud.clusters[cluster_id]:
                if node.running:
                    event = self.cloud.preemption_event(node)
                    self._send("spot_watch", event)

    # -- the agents ----------------------------------------------------------------------------

    def _boot_new_nodes(self) -> None:
        fresh, self.cloud.fresh = self.cloud.fresh, []
        for node in fresh:
            if node.running:
                spec = node.spec
                started = self.cloud.started[node.instance_id]
                self.agents[node.instance_id] = Agent(
                    spec.cluster_id, spec.job_id, spec.attempt, started, node
                )
                self.at(self.clock.now() + 1, "agent", node.instance_id)

    def _agent_step(self, settings: Settings, job: Job, instance_id: str) -> None:
        agent = self.agents[instance_id]
        if agent.phase == "gone":
            return
        if not agent.node.running:
            self._end(job, agent)
            return
        if agent.phase == "boot":
            self._boot(settings, job, agent)
            return
        progress = self.clock.now() - agent.launched_at - job.overhead
        if job.done + progress >= job.work - 1e-6:
            report_agent_status(
                wiring_for(settings),
                AgentReport(agent.job_id, agent.node.instance_id, "succeeded", exit_code=0),
            )
            self._end(job, agent)
            return
        answer = report_agent_status(
            wiring_for(settings), AgentReport(agent.job_id, agent.node.instance_id, "heartbeat")
        )
        if answer.stop or answer.cancel:
            self._end(job, agent)
            return
        self._next_step(job, agent)

    def _next_step(self, job: Job, agent: Agent) -> None:
        finish_at = agent.launched_at + job.overhead + (job.work - job.done)
        self.at(min(finish_at, self.clock.now() + 600), "agent", agent.node.instance_id)

    def _boot(self, settings: Settings, job: Job, agent: Agent) -> None:
        headers = {
            "authorization": f"Bearer {boot_token(settings, agent.job_id, agent.attempt)}",
            "x-skyless-node-key": f"key-of-{agent.node.instance_id}",
        }
        try:
            caller = authenticate_boot(headers, agent.job_id, settings)
            config = first_config(
                settings, agent.job_id, agent.node.instance_id, caller.attempt, caller.node_key
            )
        except (StaleAttemptError, AuthError, NotFoundError):
            agent.phase = "gone"
            return
        if config is None:  # 425: the job is not on this attempt yet (made before break)
            self.at(self.clock.now() + BOOT_RETRY_SECONDS, "agent", agent.node.instance_id)
            return
        wiring = wiring_for(settings)
        for phase in ("setting_up", "running"):
            answer = report_agent_status(wiring, AgentReport(agent.job_id, agent.node.instance_id, phase))
            if answer.stop or answer.cancel:
                agent.phase = "gone"
                return
        agent.phase = "run"
        if agent.node.rank == 0:
            self.monitor.task_changed(agent.job_id, agent.cluster_id, True)
        self._next_step(job, agent)

    def _end(self, job: Job, agent: Agent) -> None:
        if agent.phase == "run" and agent.node.rank == 0:  # the task's progress, once per cluster
            ended = self.cloud.ended.get(agent.node.instance_id, self.clock.now())
            job.done = min(job.work, job.done + max(0.0, ended - agent.launched_at - job.overhead))
            self.monitor.task_changed(agent.job_id, agent.cluster_id, False)
        agent.phase = "gone"


class _Queue:
    def __init__(self, kind: str, send: Any) -> None:
        self.kind = kind
        self._send = send

    def send(self, body: dict[str, Any], delay_seconds: int = 0) -> None:
        self._send(self.kind, body, delay_seconds)


class _Queues:
    def __init__(self, send: Any) -> None:
        self.optimize = _Queue("optimize", send)
        self.provision = _Queue("provision", send)
        self.spot_watch = _Queue("spot_watch", send)
        self.teardown = _Queue("teardown", send)


# -- where a run starts, and the same job replayed -------------------------------------------------


def trace_start(traces: list[ZoneTrace], start_hours: float) -> float:
    """Where a run starting `start_hours` into the traces begins, in seconds: on the trace sample the
    replay and the best possible start from, when the traces share one sample gap (else as given). Started
    between samples, the control plane would run another window than the schedules it is judged against."""
    gaps = {t.gap for t in traces}
    if len(gaps) != 1:
        return start_hours * HOUR
    gap = gaps.pop()
    return (start_hours * HOUR // gap) * gap


def availability(trace: ZoneTrace, nodes: int) -> AvailabilityTrace:
    return AvailabilityTrace(
        trace.zone, trace.gap, tuple(trace.spot_for(nodes, i) for i in range(len(trace.counts)))
    )


def replayed(
    traces: list[ZoneTrace], args: argparse.Namespace, start_hours: float
) -> dict[str, float] | None:
    """The same job replayed through the pure policy (`shared.spot_policy.replay`), with the best possible
    cost for a deadline job; None when the traces' sample gaps differ (the replay needs one clock)."""
    if len({t.gap for t in traces}) != 1:
        return None
    gap = traces[0].gap
    n = args.nodes
    avail = [availability(t, n) for t in traces]
    places = [PlaceOption(t.zone, args.spot_price * n, args.on_demand_price * n, t.region) for t in traces]
    work, overhead = args.work_hours * HOUR, args.restart_hours * HOUR
    deadline = (args.deadline_hours or 50 * args.work_hours) * HOUR
    if args.policy != "skyless":
        policy = PEERS[args.policy]()
    else:
        policy = decide if args.deadline_hours is not None else decide_spot_only
    common: dict[str, Any] = {
        "start_tick": int(start_hours * HOUR // gap),
        "total_work": work,
        "restart_overhead": overhead,
    }
    result = replay(policy, avail, places, deadline_after=deadline, **common)
    all_on_demand = args.on_demand_price * n * (args.work_hours + args.restart_hours)
    out = {"cost": result.cost / all_on_demand, "missed": float(result.missed), "launches": result.restarts}
    if args.deadline_hours is not None:
        greedy = replay(decide_greedy, avail, places, deadline_after=deadline, **common)
        out["greedy"] = greedy.cost / all_on_demand
    if args.deadline_hours is not None and args.best:
        best = optimal_cost(avail, places, deadline_after=deadline, upper_bound=result.cost, **common)
        out["best"] = best / all_on_demand
    return out
