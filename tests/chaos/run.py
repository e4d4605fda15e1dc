"""A chaos run: many jobs through the real core operations (submit, plan_job, provision_job, agent reports,
instance events, reconcile, the reaper, cancel), with every message delivered at least twice, shuffled and
late, crashes injected before and after store, queue and cloud calls, capacity outages, transient errors,
preemption storms that take whole zones, and single nodes of multi-node clusters taken away.

It is an event-driven simulation in simulated time (chaos.clock): messages, agents' next steps, sweeps and
chaos events each have a due time; due items run in random order; when nothing is due the clock jumps.
The store is the real one (DynamoDB: moto), the cloud an in-memory one whose ground truth the invariants
are checked against at every change (chaos.sim_cloud.Monitor).

A run is a function of its seed: the clock starts at the same instant, job ids are drawn from the seed,
and the module `random` the product's sweeps shuffle with (reconcile's and the reaper's order) is seeded
for the run and given back as it was. Otherwise a finding could not be replayed: the order reconcile
checked jobs in, and so where the injected crashes fell, differed from one run of a seed to the next.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import random
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.agents import AgentFleet, SimAgent
from chaos.bus import BusQueue, BusQueues, ChaosBus, Copy
from chaos.clock import RUN_START, SimClock
from chaos.faults import FaultInjector, Faulty, SimulatedCrash
from chaos.memory_objects import MemoryObjects
from chaos.sim_cloud import Monitor, SimCloud, SimRegistry
from shared.budgets.records import MemoryBudgets
from shared.config import Settings
from shared.errors import ConflictError
from shared.jobs.cancellation import cancel_job
from shared.jobs.instance_events import watch_instance_event
from shared.jobs.planning import plan_job
from shared.jobs.provisioning import provision_job
from shared.jobs.reaper import reap_orphans
from shared.jobs.reconcile import reconcile
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import ALLOWED, IllegalTransition, JobState, is_terminal
from shared.store.contract_records import MemoryContractRecords
from shared.store.cooldowns import CooldownStore
from shared.store.jobs import DynamoJobStore as JobStore
from shared.store.memory import MemoryJobStore
from shared.store.memory_records import MemoryNotificationStore, MemoryReaperMarks, MemoryScheduleStore
from shared.wiring import Wiring, install_wiring, uninstall_wiring, wiring_for

DROUGHT_REGION = "aws/us-east-1"
DEADLINES = {  # (deadline, hours of work)
    "deadline": ("3h", 0.5),
    "deadline-move": ("2h", 70 / 60),
    "deadline-overrun": ("3h", 0.005),  # 18 s: with a short restart overhead most tasks run past it
}
TASKS = {
    "simple": "name: simple\nresources:\n  cpus: 1+\nrun: echo hi\n",
    "spot": "name: spot\nresources:\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n",
    "spot-2-nodes": "name: ddp\nnum_nodes: 2\nresources:\n  cpus: 2+\n  use_spot: true\nrun: torchrun t.py\n",
    "spot-or-on-demand": (
        "name: either\nresources:\n  cpus: 2+\n  job_recovery: FAILOVER\n  any_of:\n"
        "    - use_spot: true\n    - use_spot: false\nrun: python train.py\n"
    ),
    "deadline": "name: deadline\nresources:\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n",
    "deadline-overrun": "name: overrun\nresources:\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n",
    # a tighter deadline in one region, which spot droughts visit: on-demand while spot is refused there, then
    # moved to spot (made before break) when the policy's check finds it offered again
    "deadline-move": (
        f"name: deadline-move\nresources:\n  cloud: {DROUGHT_REGION.split('/')[0]}\n"
        f"  region: {DROUGHT_REGION.split('/')[1]}\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"
    ),
    "pipeline": (
        "name: prep\nresources:\n  cpus: 1+\n  use_spot: true\nrun: python prep.py\n---\n"
        "name: train\nresources:\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"
    ),
}
HANDLERS: dict[str, Callable[[dict[str, Any], Wiring], Any]] = {
    "optimize": plan_job,
    "provision": provision_job,
    "spot_watch": watch_instance_event,
    "teardown": provision_job,
}


DONE_CHECK_SECONDS = 60.0
MOVE_WORDS = "obtained on"  # shared/jobs/make_before_break.py's cause: "N node(s) obtained on P (M) first"


@dataclass
class ChaosConfig:
    jobs: int = 40
    seed: int = 1
    arrival_seconds: float = 3.0  # mean gap between submissions
    crash_rate: float = 0.03  # chance a store/queue/cloud call crashes (before or after it)
    copies: int = 2  # every message is delivered at least this often
    late_seconds: float = 20.0  # mean lateness of a copy
    transient_rate: float = 0.03  # launches answered with a transient error
    preemptions_per_hour: float = 60.0  # single spot nodes reclaimed (any node of any cluster)
    storms_per_hour: float = 4.0  # a whole zone reclaimed, and out of capacity for a while
    outage_seconds: float = 900.0
    cancels: float = 0.05  # share of jobs the user cancels at some point
    work: int = 6  # heartbeats a task runs, at most (each 2-10 s)
    task_fail_rate: float = 0.03
    drain_hours: float = 12.0  # after the last submission, how long jobs get to finish
    drought_seconds: float = 1200.0  # DROUGHT_REGION refuses spot this long, offers it as long, and so on
    tasks: dict[str, float] = field(
        default_factory=lambda: {
            "simple": 0.15, "spot": 0.25, "spot-2-nodes": 0.2, "spot-or-on-demand": 0.1, "pipeline": 0.1,
            "deadline": 0.1, "deadline-move": 0.1,
        }
    )  # fmt: skip


@dataclass
class ChaosReport:
    jobs: int
    outcomes: Counter[str]
    lost: list[str]
    stuck: list[str]
    unfenced_launches: dict[str, list[str]]  # a job's attempt launched while an earlier one was still live
    extra_cluster_too_long: dict[str, list[str]]  # a second live cluster for longer than booting takes
    three_live_clusters: dict[str, list[str]]
    two_running_tasks: dict[str, list[str]]
    vms_left_after_reconcile: list[str]
    vms_left_after_reaper: list[str]
    illegal_moves: list[str]
    handler_errors: list[str]
    crashes: int
    crash_points: int
    crash_points_possible: int
    crashed_at: set[str]
    called: set[str]
    calls: int
    messages_sent: int
    deliveries: int
    launch_requests: int
    preemptions: int
    storms: int
    stale_agents_stopped: int
    simulated_hours: float
    extra_clusters: int = 0  # extra (made-before-break) clusters booted beside a live one
    extra_seconds: float = 0.0  # the longest one was live beside an earlier one
    moves: int = 0  # extras the job then ran on alone (the cloud's ground truth)
    moves_in_timelines: int = 0  # "obtained ... first" moves the jobs' timelines record (the product's word)
    extras_let_go: int = 0  # extras terminated before the job moved onto them
    moves_refused: int = 0  # launches refused while the job had a live cluster (it stayed put)
    spot_refused: int = 0  # spot launches refused by droughts
    extra_ran_task: dict[str, list[str]] = field(default_factory=dict)  # a task began on an extra
    stories: dict[str, list[str]] = field(default_factory=dict)  # job -> what happened, for each finding
    sweeps: dict[str, tuple[int, int]] = field(default_factory=dict)  # reconcile/reaper: (completed, crashed)
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def clean(self) -> bool:
        return not (
            self.lost
            or self.stuck
            or self.unfenced_launches
            or self.extra_cluster_too_long
            or self.extra_ran_task
            or self.three_live_clusters
            or self.two_running_tasks
            or self.vms_left_after_reconcile
            or self.illegal_moves
            or self.handler_errors
        )

    def summary(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "outcomes": dict(self.outcomes),
            "lost": len(self.lost),
            "stuck": len(self.stuck),
            "unfenced_launches": len(self.unfenced_launches),
            "extra_cluster_too_long": len(self.extra_cluster_too_long),
            "three_live_clusters": len(self.three_live_clusters),
            "extra_clusters_booted": self.extra_clusters,
            "extra_cluster_max_seconds": round(self.extra_seconds, 1),
            "extra_ran_task": len(self.extra_ran_task),
            "moves": self.moves,
            "moves_in_timelines": self.moves_in_timelines,
            "extras_let_go": self.extras_let_go,
            "moves_refused": self.moves_refused,
            "spot_refused": self.spot_refused,
            "two_running_tasks": len(self.two_running_tasks),
            "vms_left_after_reconcile": len(self.vms_left_after_reconcile),
            "vms_left_after_reaper": len(self.vms_left_after_reaper),
            "illegal_moves": len(self.illegal_moves),
            "handler_errors": len(self.handler_errors),
            "crashes": self.crashes,
            "crash_points": f"{self.crash_points} of {self.crash_points_possible}",
            "calls": self.calls,
            "messages_sent": self.messages_sent,
            "deliveries": self.deliveries,
            "launch_requests": self.launch_requests,
            "preemptions": self.preemptions,
            "storms": self.storms,
            "stale_agents_stopped": self.stale_agents_stopped,
            "simulated_hours": round(self.simulated_hours, 1),
        }


class ChaosRun:
    def __init__(self, settings: Settings, config: ChaosConfig, store: MemoryJobStore | None = None) -> None:
        self.settings = settings
        self.config = config
        self.rng = random.Random(config.seed)
        self.clock = SimClock(detached=True, start=RUN_START)
        self.monitor = Monitor(self.clock)
        self.injector = FaultInjector(random.Random(config.seed + 1), config.crash_rate)
        self.bus = ChaosBus(
            random.Random(config.seed + 2), self.clock, config.copies, late=config.late_seconds
        )
        self.cloud = SimCloud(random.Random(config.seed + 3), self.monitor, config.transient_rate)
        self.fleet = AgentFleet(settings, random.Random(config.seed + 4), self.monitor, config.work,
                                config.task_fail_rate)  # fmt: skip
        self.job_ids = random.Random(config.seed + 5)
        self.raw_store: JobStore | MemoryJobStore = JobStore(settings) if store is None else store
        self.monitor.attempt_of = self._attempt_of
        self.wiring = self._wiring()
        self.jobs: dict[str, str] = {}  # submitted job id -> task kind
        self.cancel_at: dict[str, float] = {}
        self.handler_errors: list[str] = []
        self.illegal: list[str] = []
        self.preemptions = 0
        self.storms = 0
        self._agenda: list[tuple[float, int, str, Any]] = []  # (due, seq, kind, payload)
        self._seq = itertools.count()
        self._submits_left = 0
        self.completed_runs: Counter[str] = Counter()  # operations (by label) that ran to the end
        self.crashed_runs: Counter[str] = Counter()  # ... that a crash ended
        self._done_checked = float("-inf")

    def _wiring(self) -> Wiring:
        inject = self.injector
        store = Faulty(
            self.raw_store, inject, "store", frozenset({"new_cluster", "new_node_ref", "node_actions"})
        )
        queues = BusQueues(*(Faulty(BusQueue(self.bus, k), inject, f"queue.{k}") for k in HANDLERS))
        providers = SimRegistry(Faulty(self.cloud, inject, "cloud", frozenset({"preemption_event", "kill"})))
        raw = self.raw_store
        if isinstance(raw, MemoryJobStore):  # and the other records in memory too
            records: dict[str, Any] = {
                "schedule_records": MemoryScheduleStore(), "notification_records": MemoryNotificationStore(),
                "reaper_mark_records": MemoryReaperMarks(), "budget_records": MemoryBudgets(),
                "contract_records": MemoryContractRecords(),
            }  # fmt: skip
            cooldown_record: Any = raw.cooldowns
        else:
            records, cooldown_record = {}, CooldownStore(self.settings)
        cooldowns = Faulty(cooldown_record, inject, "cooldowns")
        objects = MemoryObjects()
        return Wiring(self.settings, store, queues, objects, providers, cooldowns, **records)  # type: ignore[arg-type]

    def _attempt_of(self, job_id: str) -> int | None:
        job = self.raw_store.get(job_id)
        return None if job is None else int(job.attempt)

    # -- the agenda ----------------------------------------------------------------------------

    def at(self, due: float, kind: str, payload: Any = None) -> None:
        heapq.heappush(self._agenda, (due, next(self._seq), kind, payload))

    def _due(self) -> list[tuple[str, Any]]:
        now = self.clock.now()
        due = []
        while self._agenda and self._agenda[0][0] <= now:
            _, _, kind, payload = heapq.heappop(self._agenda)
            due.append((kind, payload))
        return due

    def _next_time(self) -> float | None:
        times = [t for t in (self.bus.next_visible_at(), self._agenda[0][0] if self._agenda else None) if t]
        return min(times) if times else None

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> ChaosReport:
        install_wiring(self.wiring)
        outside = random.getstate()
        random.seed(self.config.seed + 6)
        try:
            with self.clock.installed():
                return self._run()
        finally:
            random.setstate(outside)
            uninstall_wiring(self.settings)

    def _run(self) -> ChaosReport:
        start = self.clock.now()
        config = self.config
        arrival = start
        kinds, weights = zip(*config.tasks.items(), strict=True)
        for _ in range(config.jobs):
            arrival += self.rng.expovariate(1 / config.arrival_seconds)
            self.at(arrival, "submit", self.rng.choices(kinds, weights)[0])
            self._submits_left += 1
        last_arrival = arrival
        calm_at = last_arrival + 600  # no new preemptions, storms or outages after this
        self._schedule_chaos(start, calm_at)
        if config.drought_seconds > 0:
            self.at(start, "drought", True)
        self.at(start + 60, "reconcile")
        self.at(start + 300, "reaper")
        deadline = last_arrival + config.drain_hours * 3600
        while self.clock.now() < deadline:
            due = self._due()
            self.rng.shuffle(due)
            ran = bool(due)
            for kind, payload in due:
                self._do(kind, payload, calm_at)
            while self.bus.has_visible():
                self._deliver(self.bus.take())  # type: ignore[arg-type]
                ran = True
            self._boot_new_nodes()
            if self.clock.now() > last_arrival and self._all_done():
                break
            if not ran:
                upcoming = self._next_time()
                self.clock.advance((upcoming or self.clock.now() + 30) - self.clock.now())
        return self._finish(start)

    def _schedule_chaos(self, start: float, calm_at: float) -> None:
        config = self.config
        for rate, kind in ((config.preemptions_per_hour, "preempt"), (config.storms_per_hour, "storm")):
            t = start
            while rate > 0:
                t += self.rng.expovariate(rate / 3600)
                if t > calm_at:
                    break
                self.at(t, kind)

    def _do(self, kind: str, payload: Any, calm_at: float) -> None:
        now = self.clock.now()
        if kind == "submit":
            self._submit(payload)
        elif kind == "agent":
            self._agent_step(payload)
        elif kind == "reconcile":
            self._guard("reconcile", lambda: reconcile(wiring=self.wiring))
            self.at(now + 60, "reconcile")
        elif kind == "reaper":
            self._guard("reaper", lambda: reap_orphans(self.wiring))
            self.at(now + 300, "reaper")
        elif kind == "preempt":
            self._preempt_one()
        elif kind == "storm":
            self._storm(calm_at)
        elif kind == "drought":
            (self.cloud.no_spot.add if payload else self.cloud.no_spot.discard)(DROUGHT_REGION)
            if payload or now + self.config.drought_seconds < calm_at:
                self.at(min(calm_at, now + self.config.drought_seconds), "drought", not payload)
        elif kind == "capacity_back":
            self.cloud.out_of_capacity.discard(payload)
        elif kind == "cancel":
            self._cancel(payload)

    def _guard(self, label: str, call: Callable[[], Any]) -> bool:
        """Run one operation; a crash is a crash (False); any other exception is a bug, recorded."""
        try:
            call()
        except SimulatedCrash:
            self.crashed_runs[label] += 1
            return False
        except IllegalTransition as error:
            self.illegal.append(f"{label}: {error}")
            return False
        except Exception as error:
            self.handler_errors.append(f"{label}: {error!r}\n{traceback.format_exc(limit=6)}")
            return False
        self.completed_runs[label] += 1
        return True

    # -- what users, queues and agents do ------------------------------------------------------

    def _submit(self, kind: str) -> None:
        self._submits_left -= 1
        job_id = f"job-{self.job_ids.getrandbits(48):012x}"  # as new_job_id's, from the seed
        deadline: dict[str, Any] = {}
        if kind in DEADLINES:  # its policy moves it
            deadline = dict(zip(("deadline", "hours"), DEADLINES[kind], strict=True))
        command = SubmitJob.from_text(owner="chaos", task_text=TASKS[kind], job_id=job_id, **deadline)
        for _ in range(20):  # the client retries a failed request with the same id
            ok = self._guard("submit", lambda: submit_job(wiring_for(self.settings), command))
            if ok:
                break
        else:
            return
        self.jobs[job_id] = kind
        if kind in DEADLINES:
            self.fleet.long_jobs.add(job_id)  # runs long enough for the policy's checks to move it
        if self.rng.random() < self.config.cancels:
            self.at(self.clock.now() + self.rng.uniform(5, 600), "cancel", job_id)

    def _cancel(self, job_id: str) -> None:
        def cancel() -> None:
            with contextlib.suppress(ConflictError):  # already over
                cancel_job(wiring_for(self.settings), job_id, owner=None)

        if not self._guard("cancel", cancel):
            self.at(self.clock.now() + 2, "cancel", job_id)

    def _deliver(self, copy: Copy) -> None:
        handler = HANDLERS[copy.kind]
        if not self._guard(copy.kind, lambda: handler(copy.body, self.wiring)):
            self.bus.put_back(copy)

    def _boot_new_nodes(self) -> None:
        fresh, self.cloud.fresh = [n for n in self.cloud.fresh if n.running], []
        self.fleet.boot(fresh)
        for node in fresh:
            self.at(self.clock.now() + self.rng.uniform(2, 20), "agent", node.instance_id)

    def _agent_step(self, instance_id: str) -> None:
        agent: SimAgent = self.fleet.agents[instance_id]
        if agent.phase == "gone":
            return
        self._guard("agent", lambda: self.fleet.step(agent))
        if agent.phase != "gone":
            self.at(self.clock.now() + self.rng.uniform(2, 10), "agent", instance_id)

    # -- chaos ---------------------------------------------------------------------------------

    def _preempt(self, node: Any) -> None:
        agent = self.fleet.agents.get(node.instance_id)
        if agent is not None and self.rng.random() < 0.5:
            self._guard("agent-notice", lambda: self.fleet.notice(agent))
        event = self.cloud.preemption_event(node)
        self.fleet.reap()
        self.preemptions += 1
        self.bus.send("spot_watch", event)

    def _preempt_one(self) -> None:
        nodes = self.cloud.running_spot_nodes()
        if nodes:
            self._preempt(self.rng.choice(nodes))

    def _storm(self, calm_at: float) -> None:
        """A zone reclaims all its spot capacity at once and has none for a while."""
        nodes = self.cloud.running_spot_nodes()
        if not nodes:
            if self.clock.now() < calm_at:
                self.at(self.clock.now() + 30, "storm")  # no spot capacity in use yet: a little later
            return
        zone = self.rng.choice(nodes).place
        self.storms += 1
        self.cloud.out_of_capacity.add(zone)
        self.at(min(calm_at, self.clock.now() + self.config.outage_seconds), "capacity_back", zone)
        for node in [n for n in nodes if n.place == zone]:
            self._preempt(node)

    # -- the end -------------------------------------------------------------------------------

    def _all_done(self) -> bool:
        """No submission to come, no message in flight, no live job; the store is asked at most once per
        simulated DONE_CHECK_SECONDS (a listing of every job: asked at every step, the run was quadratic)."""
        if self.bus.pending() or self._submits_left:
            return False
        if self.clock.now() < self._done_checked + DONE_CHECK_SECONDS:
            return False
        self._done_checked = self.clock.now()
        return not any(self.raw_store.live_jobs())

    def _finish(self, start: float) -> ChaosReport:
        self.injector.enabled = False
        self.cloud.out_of_capacity.clear()
        self.cloud.no_spot.clear()
        reconcile(wiring=self.wiring)
        after_reconcile = self._vms_left()
        reap_orphans(self.wiring)
        self.clock.advance(301)
        reap_orphans(self.wiring)
        after_reaper = self._vms_left()
        self.monitor.close()
        outcomes: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        lost, stuck = [], []
        moves_in_timelines = 0
        for job_id in self.jobs:
            job = self.raw_store.get(job_id)
            if job is None:
                lost.append(job_id)
                continue
            outcomes[job.state] += 1
            if not is_terminal(job.state):
                stuck.append(f"{job_id} {job.state}")
            elif job.state == JobState.FAILED:
                reasons[_reason_kind(job.reason)] += 1
            problems, moved = self._timeline_problems(job_id)
            self.illegal.extend(problems)
            moves_in_timelines += moved
        return ChaosReport(
            jobs=len(self.jobs),
            outcomes=outcomes,
            lost=lost,
            stuck=stuck,
            unfenced_launches=dict(self.monitor.unfenced_launches),
            extra_cluster_too_long=dict(self.monitor.extra_cluster_too_long),
            three_live_clusters=dict(self.monitor.three_live_clusters),
            two_running_tasks=dict(self.monitor.two_running_tasks),
            vms_left_after_reconcile=after_reconcile,
            vms_left_after_reaper=after_reaper,
            illegal_moves=self.illegal,
            handler_errors=self.handler_errors,
            crashes=sum(self.injector.crashes.values()),
            crash_points=len(self.injector.crashes),
            crash_points_possible=2 * len(self.injector.called),
            crashed_at=set(self.injector.crashes),
            called=set(self.injector.called),
            calls=self.injector.calls,
            messages_sent=self.bus.sent,
            deliveries=self.bus.delivered,
            launch_requests=self.cloud.launch_requests,
            preemptions=self.preemptions,
            storms=self.storms,
            stale_agents_stopped=self.fleet.stopped_by_api,
            simulated_hours=(self.clock.now() - start) / 3600,
            reasons=reasons,
            extra_clusters=self.monitor.extra_clusters,
            extra_seconds=self.monitor.extra_seconds,
            moves=self.monitor.moves,
            moves_in_timelines=moves_in_timelines,
            extras_let_go=self.monitor.extras_let_go,
            moves_refused=self.cloud.refused_beside_live,
            spot_refused=self.cloud.spot_refused,
            extra_ran_task=dict(self.monitor.extra_ran_task),
            stories=self._stories(start),
            sweeps={k: (self.completed_runs[k], self.crashed_runs[k]) for k in ("reconcile", "reaper")},
        )

    def _stories(self, start: float) -> dict[str, list[str]]:
        """For each job of a ground-truth finding: the cloud's and its agents' changes and its timeline, in
        order (seconds since the run began)."""
        monitor = self.monitor
        found = {*monitor.unfenced_launches, *monitor.extra_cluster_too_long, *monitor.three_live_clusters,
                 *monitor.two_running_tasks, *monitor.extra_ran_task}  # fmt: skip
        stories = {}
        for job_id in sorted(found):
            lines = list(monitor.changes.get(job_id, []))
            for event in self.raw_store.timeline(job_id):
                at = float(event.at.split("#", 1)[0])
                lines.append((at, f"{event.kind}: {event.state or ''} {event.message}"[:240]))
            stories[job_id] = [f"{at - start:8.1f} {line}" for at, line in sorted(lines, key=lambda x: x[0])]
        return stories

    def _vms_left(self) -> list[str]:
        """Running VMs that are not their live job's current cluster."""
        left = []
        for node in self.cloud.running_nodes():
            job = self.raw_store.get(node.spec.job_id)
            if job is None or is_terminal(job.state) or job.cluster_id != node.spec.cluster_id:
                left.append(
                    f"{node.instance_id} ({node.spec.cluster_id}, job {job.state if job else 'gone'})"
                )
        return left

    def _timeline_problems(self, job_id: str) -> tuple[list[str], int]:
        """State events must follow allowed moves, one version after another; and the made-before-break
        moves the timeline records."""
        events = [e for e in self.raw_store.timeline(job_id) if e.kind == "state"]
        moved = sum(1 for e in events if e.state == JobState.RECOVERING and MOVE_WORDS in (e.message or ""))
        problems = []
        states = [e.state for e in events]
        if states and states[0] not in (JobState.PENDING, JobState.PLANNED):
            problems.append(f"{job_id}: first state {states[0]}")
        for before, after in itertools.pairwise(states):
            if (JobState(before), JobState(after)) not in ALLOWED:
                problems.append(f"{job_id}: {before} -> {after}")
        versions = [int(e.at.rsplit("#v", 1)[1]) for e in events if "#v" in e.at]
        if versions != sorted(set(versions)):
            problems.append(f"{job_id}: versions {versions}")
        return problems, moved


def _reason_kind(reason: str | None) -> str:
    text = (reason or "").split(":", 1)[0]
    return " ".join(text.split()[:4])


def run_chaos(settings: Settings, config: ChaosConfig, store: MemoryJobStore | None = None) -> ChaosReport:
    """`store`: None for the real one (DynamoJobStore: the tables of `settings` must exist), or a
    MemoryJobStore (held to DynamoDB's conditions by tests/unit/test_job_store_contract.py), with every
    other record in memory too."""
    return ChaosRun(settings, config, store).run()


def report_json(report: ChaosReport) -> str:
    return json.dumps(report.summary(), indent=2)
