"""Control-plane benchmark: latency from event to action, AWS calls per job, and what they cost.

Runs the local runtime in this process (moto server, the Chalice API over HTTP, the dispatcher with the
real handlers) so that every botocore call the control plane makes can be counted, by service and
operation, through botocore's `before-call` events. The `local` cloud launches a `sleep` process per node
instead of the node agent, and this script plays the agents' part over HTTP (config, setting_up,
running, one heartbeat, succeeded): the figures are the control plane's, not the task's.

    .venv/bin/python benchmarks/control_plane.py                 # 200 jobs, 50 preemptions
    .venv/bin/python benchmarks/control_plane.py --jobs 50 --preemptions 10
    .venv/bin/python benchmarks/control_plane.py --jobs 200 --preemptions 200 --concurrency 1 --runs 5

Prints: submit -> launch-request latency (p50, p99), preemption event -> replacement launch-request
latency (p50, p99), DynamoDB/SQS/S3 calls per simple job lifecycle, and dollars per 1,000 jobs.

This is the one count of DynamoDB writes (it replaces benchmarks/lifecycle_writes.py). Three figures:
- write calls: PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems requests;
- items written: each item a call writes (a transaction of 4 items is 4; what the <= 12 target counts);
- billed write units: what on-demand DynamoDB charges, per item ceil(item size / 1 KB), twice inside a
  transaction. The size of an updated or deleted item is its stored size (read just before the write,
  uncounted) plus the values the update sets; an item's size follows DynamoDB's rules (names + values).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aws_call_counts import CallCounter, stored_item_reader
from control_plane_report import report, run_figures

SIMPLE_TASK = "name: bench\nresources:\n  cpus: 1+\nrun: echo hello\n"
SPOT_TASK = "name: bench-spot\nresources:\n  cpus: 2\n  use_spot: true\nrun: echo hello\n"


@dataclass
class LaunchLog:
    """Every launch request the provision handler makes, in order, with the time it was made."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    launches: dict[str, list[tuple[float, Any, list[Any]]]] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def record(self, when: float, spec: Any, nodes: list[Any]) -> None:
        with self.arrived:
            runs = self.launches.setdefault(spec.job_id, [])
            if all(s.attempt_id != spec.attempt_id for _, s, _ in runs):
                runs.append((when, spec, nodes))
            self.arrived.notify_all()

    def wait_for(self, job_id: str, count: int, timeout: float = 120) -> tuple[float, Any, list[Any]]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.launches.get(job_id, [])) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"job {job_id}: launch #{count} never came")
                self.arrived.wait(left)
            return self.launches[job_id][count - 1]


def patch_local_cloud(log: LaunchLog) -> None:
    """Nodes become `sleep` processes, and each launch request is timed as provision makes it."""
    from shared.clouds import local

    local.AGENT_COMMAND = ["sleep", "3600"]
    original: Callable[..., list[Any]] = local.LocalCloud.launch

    def launch(self: Any, spec: Any) -> list[Any]:
        asked = time.perf_counter()
        nodes = original(self, spec)
        log.record(asked, spec, nodes)
        return nodes

    local.LocalCloud.launch = launch  # type: ignore[method-assign]


NODE_KEY = "benchmark-agent-node-key"


class AgentPlayer:
    """Plays a node agent's part of the protocol over HTTP."""

    def __init__(self, api_url: str) -> None:
        self.http = httpx.Client(base_url=api_url, timeout=60)
        self.requests = 0
        self.tokens: dict[str, str] = {}  # instance id -> the agent token its config fetch answered

    def _call(self, method: str, path: str, token: str, **kwargs: Any) -> httpx.Response:
        self.requests += 1
        headers = {"Authorization": f"Bearer {token}", "X-Skyless-Node-Key": NODE_KEY}
        return self.http.request(method, path, headers=headers, **kwargs)

    def config(self, job_id: str, instance_id: str, boot_token: str) -> dict[str, Any]:
        for _ in range(600):
            path, query = f"/agent/{job_id}/config", {"instance_id": instance_id}
            answer = self._call("GET", path, boot_token, params=query)
            if answer.status_code == 200:
                return answer.json()
            if answer.status_code != 425:
                raise RuntimeError(f"config: {answer.status_code} {answer.text}")
            time.sleep(0.05)
        raise TimeoutError("config never ready")

    def report(
        self, job_id: str, instance_id: str, token: str, phase: str, exit_code: int | None = None
    ) -> None:
        body: dict[str, Any] = {"instance_id": instance_id, "phase": phase}
        if exit_code is not None:
            body["exit_code"] = exit_code
        answer = self._call("POST", f"/agent/{job_id}/status", token, json=body)
        if answer.status_code >= 300:
            raise RuntimeError(f"status {phase}: {answer.status_code} {answer.text}")

    def run_until_running(self, spec: Any, nodes: list[Any]) -> None:
        boot = spec.agent_env["SKYLESS_BOOT_TOKEN"]
        for node in nodes:
            self.tokens[node.instance_id] = self.config(spec.job_id, node.instance_id, boot)["agent_token"]
        for node in nodes:
            self.report(spec.job_id, node.instance_id, self.tokens[node.instance_id], "setting_up")
        for node in nodes:
            self.report(spec.job_id, node.instance_id, self.tokens[node.instance_id], "running")

    def finish(self, spec: Any, nodes: list[Any]) -> None:
        for node in nodes:
            self.report(spec.job_id, node.instance_id, self.tokens[node.instance_id], "heartbeat")
        for node in nodes:
            self.report(spec.job_id, node.instance_id, self.tokens[node.instance_id], "succeeded", 0)


def wait_until_quiet(runtime: Any, counter: CallCounter, timeout: float = 120) -> None:
    """Until every queue is empty and nothing is in flight (teardowns and the last writes are done)."""
    from local_runtime.node_control import queue_depths

    deadline = time.monotonic() + timeout
    quiet_since = None
    while time.monotonic() < deadline:
        with counter.ignored():
            depths = queue_depths(runtime.settings)
        busy = any(d.visible or d.in_flight or d.delayed for d in depths)
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 1.0:
            return
        time.sleep(0.2)
    raise TimeoutError("queues never drained")


def job_states(api: httpx.Client, job_ids: list[str]) -> Counter[str]:
    return Counter(api.get(f"/jobs/{job_id}").json()["state"] for job_id in job_ids)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from local_runtime.daemon import LocalRuntime
    from local_runtime.local_settings import local_client
    from local_runtime.moto_endpoint import free_port
    from shared.clouds.local import LocalCloud, preemption_event

    counter = CallCounter()
    counter.install()
    launches = LaunchLog()
    patch_local_cloud(launches)
    step_seconds: dict[str, list[float]] = {}
    time_steps(step_seconds)
    handler_seconds: Counter[str] = Counter()
    handler_calls: Counter[str] = Counter()

    home = Path(tempfile.mkdtemp(prefix="skyless-bench-"))
    # No reconcile ticks and no periodic snapshots: their calls are per minute, not per job.
    runtime = LocalRuntime(home, free_port(), free_port(), schedules={}, snapshot_every=None)
    info = runtime.start()
    counter.sizer = stored_item_reader(runtime)
    hops = HopLog()
    for worker in runtime.dispatcher.workers if runtime.dispatcher else []:
        worker._handler = timed(worker.handler(), worker.kind, handler_seconds, handler_calls, hops)
    api = httpx.Client(base_url=info.api_url, timeout=60, headers={"Authorization": f"Bearer {info.api_key}"})
    player = AgentPlayer(info.api_url)
    try:
        # -- simple jobs: submit -> launch request, and the calls of a whole lifecycle -----------------
        before_calls, before_units, before_wru, before_beats = counter.snapshot()
        api_requests_before = player.requests
        submitted: dict[str, float] = {}
        answered: dict[str, float] = {}
        job_ids: list[str] = []

        def submit(task: str) -> str:
            started = time.perf_counter()
            answer = api.post("/jobs", json={"task": task, "filename": "bench.yaml"})
            answer.raise_for_status()
            job_id = answer.json()["job_id"]
            submitted[job_id], answered[job_id] = started, time.perf_counter()
            return job_id

        with ThreadPoolExecutor(args.concurrency) as pool:
            futures = []
            for _ in range(args.jobs):
                job_id = submit(SIMPLE_TASK)
                job_ids.append(job_id)
                futures.append(pool.submit(play_simple, launches, player, job_id))
                time.sleep(1 / args.rate)
            for future in futures:
                future.result()
        wait_until_quiet(runtime, counter)
        after_calls, after_units, after_wru, after_beats = counter.snapshot()
        simple_states = job_states(api, job_ids)
        submit_latency = [launches.wait_for(j, 1)[0] - submitted[j] for j in job_ids]
        submit_parts = [
            parts
            for j in job_ids
            if (parts := submit_breakdown(hops, j, submitted[j], answered[j], launches.wait_for(j, 1)[0]))
        ]
        lifecycle_calls = after_calls - before_calls
        lifecycle_units = after_units - before_units
        lifecycle_write_units = after_wru - before_wru
        heartbeat_items = after_beats - before_beats
        api_requests = args.jobs + (player.requests - api_requests_before)  # submits + agent requests
        simple_handler_seconds = dict(handler_seconds)
        simple_handler_calls = dict(handler_calls)

        # -- preemptions: event -> replacement launch request ---------------------------------------
        events = local_client("events", runtime.settings)
        cloud = LocalCloud(home)
        preempt_latency: list[float] = []
        preempt_parts: list[dict[str, float]] = []
        spot_ids: list[str] = []
        step_seconds.clear()  # from here on, the steps of preemptions (and their jobs' agents)

        def preempt_one() -> float:
            job_id = submit(SPOT_TASK)
            spot_ids.append(job_id)
            _, spec, nodes = launches.wait_for(job_id, 1)
            player.run_until_running(spec, nodes)
            record = json.loads((home / "local" / "nodes" / spec.cluster_id / "0" / "node.json").read_text())
            event = cloud.preempt(spec.cluster_id, 0) or preemption_event(record)
            entry = {"Source": event["source"], "DetailType": event["detail-type"],
                     "Detail": json.dumps(event["detail"]), "Resources": event["resources"]}  # fmt: skip
            sent = time.perf_counter()
            with counter.ignored():
                events.put_events(Entries=[entry])
            asked, new_spec, new_nodes = launches.wait_for(job_id, 2)
            player.run_until_running(new_spec, new_nodes)
            player.finish(new_spec, new_nodes)
            parts = breakdown(hops, job_id, nodes[0].instance_id, sent, asked)
            if parts is not None:
                preempt_parts.append(parts)
            return asked - sent

        with ThreadPoolExecutor(args.concurrency) as pool:
            futures = []
            for _ in range(args.preemptions):
                futures.append(pool.submit(preempt_one))
                time.sleep(1 / args.rate)
            preempt_latency = [f.result() for f in futures]
        wait_until_quiet(runtime, counter)
        spot_states = job_states(api, spot_ids)
    finally:
        api.close()
        runtime.stop()
        shutil.rmtree(home, ignore_errors=True)

    return {
        "jobs": args.jobs,
        "preemptions": args.preemptions,
        "simple_states": dict(simple_states),
        "spot_states": dict(spot_states),
        "submit_latency": submit_latency,
        "submit_parts": submit_parts,
        "preempt_latency": preempt_latency,
        "preempt_parts": preempt_parts,
        "preempt_steps": {name: list(values) for name, values in step_seconds.items()},
        "calls": lifecycle_calls,
        "units": lifecycle_units,
        "write_units": lifecycle_write_units,
        "heartbeat_items": heartbeat_items,
        "api_requests": api_requests,
        "handler_seconds": simple_handler_seconds,
        "handler_calls": simple_handler_calls,
    }


@dataclass
class HopLog:
    """Every handler invocation: (queue, start, end, the job ids or instance ids its messages name)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    hops: list[tuple[str, float, float, set[str]]] = field(default_factory=list)

    def record(self, kind: str, started: float, ended: float, event: dict[str, Any]) -> None:
        names: set[str] = set()
        for record in event.get("Records", []):
            body = json.loads(record.get("body") or "{}")
            names.add(str(body.get("job_id") or (body.get("detail") or {}).get("instance-id") or ""))
        with self.lock:
            self.hops.append((kind, started, ended, names))

    def first(self, kind: str, name: str, after: float) -> tuple[float, float] | None:
        with self.lock:
            found = [(s, e) for k, s, e, names in self.hops if k == kind and name in names and s >= after]
        return min(found) if found else None


def breakdown(
    hops: HopLog, job_id: str, instance_id: str, sent: float, asked: float
) -> dict[str, float] | None:
    """Where one preemption's time went: the wait for the spot_watch invocation, then that invocation up to
    the launch request (it re-plans and launches itself; the optimize and launch messages are fallbacks)."""
    spot = hops.first("spot_watch", instance_id, sent)
    if spot is None:
        return None
    if spot[0] <= asked <= spot[1]:
        return {
            "event -> spot_watch (EventBridge, SQS, poll)": spot[0] - sent,
            "spot_watch until launch": asked - spot[0],
        }
    return {
        "event -> spot_watch (EventBridge, SQS, poll)": spot[0] - sent,
        "spot_watch, then queues": asked - spot[0],
    }


def submit_breakdown(
    hops: HopLog, job_id: str, sent: float, answered: float, asked: float
) -> dict[str, float] | None:
    """Where one submission's time went: up to the provision invocation (the API validates, plans, records and
    enqueues; SQS; the dispatcher's poll), then that invocation up to the launch request. The API's answer
    reaches the client about when provision starts (the message is polled before the answer is read)."""
    provision = hops.first("provision", job_id, sent)
    if provision is None:
        return None
    return {
        "POST /jobs until provision starts (API, SQS, poll)": provision[0] - sent,
        "provision until launch request": asked - provision[0],
        "(POST /jobs answered: overlaps the first part)": answered - sent,
    }


STEPS = (
    ("shared.jobs.recovery", "recover_job"),  # spot_watch's continuation runs inside it (its `then`)
    ("shared.jobs.continuation", "replan_and_launch"),
    ("shared.jobs.planning", "make_plan"),
    ("shared.jobs.fencing", "fence_earlier_attempts"),
    ("shared.jobs.launching", "task_launch_fields"),
    ("shared.clouds.local", "LocalCloud.launch"),
    ("shared.jobs.launching", "record_launch"),
)


def time_steps(seconds: dict[str, list[float]]) -> None:
    """Time the steps of the control plane's hot path (where they are looked up, so callers see the timer)."""
    import importlib

    for module_name, qualified in STEPS:
        module = importlib.import_module(module_name)
        owner: Any = module
        *path, name = qualified.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)

        def timer(*args: Any, __original: Any = original, __name: str = qualified, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                seconds.setdefault(__name, []).append(time.perf_counter() - started)

        setattr(owner, name, timer)
        users = (
            "provisioning",
            "deadline_launch",
            "agent_reports",
            "instance_events",
            "continuation",
            "planning",
            "failover",
        )
        for other in (f"shared.jobs.{u}" for u in users):
            imported = importlib.import_module(other)
            if not path and getattr(imported, name, None) is original:
                setattr(imported, name, timer)


def timed(
    handler: Callable[..., Any],
    name: str,
    seconds: Counter[str],
    calls: Counter[str],
    hops: HopLog | None = None,
) -> Callable[..., Any]:
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        started = time.perf_counter()
        try:
            return handler(event, context)
        finally:
            ended = time.perf_counter()
            seconds[name] += ended - started
            calls[name] += 1
            if hops is not None:
                hops.record(name, started, ended, event)

    return wrapper


def play_simple(launches: LaunchLog, player: AgentPlayer, job_id: str) -> None:
    _, spec, nodes = launches.wait_for(job_id, 1)
    player.run_until_running(spec, nodes)
    player.finish(spec, nodes)


def run_many(args: argparse.Namespace, argv: list[str]) -> None:
    """`--runs N`: each run in a fresh process (a fresh moto, runtime and home), the first run's report in
    full, then each run's figures and their min / median / max across runs, with the load around each."""
    import statistics
    import subprocess

    rows: list[tuple[dict[str, float], tuple[float, float]]] = []
    child = [a for i, a in enumerate(argv) if a != "--runs" and (i == 0 or argv[i - 1] != "--runs")]
    child = [a for a in child if not a.startswith("--runs=")]
    with tempfile.TemporaryDirectory(prefix="skyless-bench-runs-") as folder:
        for n in range(args.runs):
            out = Path(folder) / f"run{n}.json"
            before = os.getloadavg()[0]
            answer = subprocess.run(
                [sys.executable, __file__, *child, "--figures-to", str(out)],
                capture_output=n > 0, text=True, check=False,
            )  # fmt: skip
            if answer.returncode != 0 or not out.exists():
                sys.stderr.write(answer.stderr or "")
                raise SystemExit(f"run {n + 1} failed (exit {answer.returncode})")
            rows.append((json.loads(out.read_text()), (before, os.getloadavg()[0])))
    print()
    shape = f"--jobs {args.jobs} --preemptions {args.preemptions} --concurrency {args.concurrency}"
    print(f"{args.runs} runs, each {shape} --rate {args.rate:g} (ms; load: 1-min load average before-after)")
    names = list(rows[0][0])
    print("  run  " + "".join(f"{name:>16s}" for name in names) + "      load")
    for n, (figures, (before, after)) in enumerate(rows, 1):
        cells = "".join(f"{_shown(name, figures[name]):>16s}" for name in names)
        print(f"  {n:3d}  {cells}   {before:4.1f}-{after:4.1f}")
    for label, pick in (("min", min), ("median", statistics.median), ("max", max)):
        cells = "".join(f"{_shown(name, pick([f[name] for f, _ in rows])):>16s}" for name in names)
        print(f"  {label:6s}{cells[1:]}")


def _shown(name: str, value: float) -> str:
    return f"{value:.2f}" if name == "items a job" else f"{value * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200, help="simple jobs to run (default 200)")
    parser.add_argument("--preemptions", type=int, default=50, help="spot jobs to preempt once (default 50)")
    parser.add_argument("--rate", type=float, default=10.0, help="submissions per second (default 10)")
    parser.add_argument("--concurrency", type=int, default=8, help="agent players at once (default 8)")
    parser.add_argument("--runs", type=int, default=1, help="runs, each in a fresh process (default 1)")
    parser.add_argument(
        "--figures-to", type=Path, help=argparse.SUPPRESS
    )  # a run of --runs writes its figures
    args = parser.parse_args()
    if args.runs > 1:
        run_many(args, sys.argv[1:])
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the runtime and its nodes on the way out
    result = run(args)
    report(result)
    if args.figures_to:
        args.figures_to.write_text(json.dumps(run_figures(result)))


if __name__ == "__main__":
    main()
