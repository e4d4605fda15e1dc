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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Public AWS prices, us-east-1, on-demand (Nov 2025 list prices).
PRICES = {
    "dynamodb_write_per_million": 0.625,  # on-demand write request units (1 KB each)
    "dynamodb_read_per_million": 0.125,  # on-demand read request units (4 KB, strongly consistent)
    "sqs_request_per_million": 0.40,  # standard queue, per 64 KB request
    "s3_put_per_thousand": 0.005,  # PUT, COPY, POST, LIST
    "s3_get_per_thousand": 0.0004,  # GET and others
    "lambda_request_per_million": 0.20,
    "lambda_gb_second_arm64": 0.0000133334,
    "http_api_request_per_million": 1.00,  # API Gateway HTTP API, first 300 M
}
LAMBDA_MEMORY_GB = 0.5  # infra/template.yaml: MemorySize 512

DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
DYNAMODB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
S3_PUTS = {"PutObject", "CopyObject", "ListObjectsV2", "ListObjects", "CreateMultipartUpload", "UploadPart"}
DISPATCHER_OPERATIONS = {("sqs", "ReceiveMessage"), ("sqs", "DeleteMessageBatch"), ("sqs", "DeleteMessage")}

SIMPLE_TASK = "name: bench\nresources:\n  cpus: 1+\nrun: echo hello\n"
SPOT_TASK = "name: bench-spot\nresources:\n  cpus: 2\n  use_spot: true\nrun: echo hello\n"


def value_size(value: dict[str, Any]) -> int:
    """Bytes of one DynamoDB-JSON attribute value, by DynamoDB's item size rules."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").lstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    return len(json.dumps(raw))


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def billed_units(size: int, transactional: bool) -> int:
    return max(1, -(-size // 1024)) * (2 if transactional else 1)


class CallCounter:
    """Counts AWS API calls per (service, operation), items per call where one call carries many, and the
    DynamoDB write units those items are billed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.units: Counter[tuple[str, str]] = Counter()
        self.write_units = 0
        self.heartbeat_items = 0  # UpdateItems that set only a node's heartbeat_at (an agent's sign of life)
        self.local = threading.local()
        # reads a stored item (DynamoDB JSON) for its size; set once the stack is up
        self.sizer: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None

    @contextmanager
    def ignored(self) -> Iterator[None]:
        """The benchmark's own calls (watching queue depths, emitting events) are not the control plane's."""
        self.local.ignored = True
        try:
            yield
        finally:
            self.local.ignored = False

    def install(self) -> None:
        """Register on every botocore client created from now on (boto3 and pynamodb both go through here)."""
        original = botocore.session.Session.create_client
        counter = self

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            client.meta.events.register("before-call", counter.on_call)
            client.meta.events.register("before-parameter-build", counter.on_parameters)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]

    def on_call(self, model: Any, **_: Any) -> None:
        if getattr(self.local, "ignored", False):
            return
        with self.lock:
            self.calls[(model.service_model.service_name, model.name)] += 1

    def on_parameters(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        """Items per call, from the API parameters (before-call only sees the serialized request)."""
        if getattr(self.local, "ignored", False):
            return
        key = (model.service_model.service_name, model.name)
        items = 1
        if key == ("dynamodb", "BatchWriteItem"):
            items = sum(len(v) for v in params.get("RequestItems", {}).values())
        elif key == ("dynamodb", "TransactWriteItems"):
            items = len(params.get("TransactItems", []))
        elif key == ("sqs", "SendMessageBatch"):
            items = len(params.get("Entries", []))
        units = self.dynamodb_write_units(model.name, params) if key[0] == "dynamodb" else 0
        heartbeat = key == ("dynamodb", "UpdateItem") and is_heartbeat_write(params)
        with self.lock:
            self.units[key] += items
            self.write_units += units
            self.heartbeat_items += heartbeat

    def dynamodb_write_units(self, operation: str, params: dict[str, Any]) -> int:
        if operation == "TransactWriteItems":
            writes = [
                (kind, body) for entry in params.get("TransactItems", []) for kind, body in entry.items()
            ]
            return sum(billed_units(self.written_size(kind, body), True) for kind, body in writes)
        if operation == "BatchWriteItem":
            return sum(
                billed_units(self.written_size(kind, {"TableName": table, **body}), False)
                for table, requests in params.get("RequestItems", {}).items()
                for request in requests
                for kind, body in request.items()
            )
        kinds = {"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete"}
        return billed_units(self.written_size(kinds[operation], params), False) if operation in kinds else 0

    def written_size(self, kind: str, body: dict[str, Any]) -> int:
        if kind in ("Put", "PutRequest"):
            return item_size(body["Item"])
        stored = self.stored_size(body["TableName"], body["Key"])
        if kind == "Update":
            return stored + sum(value_size(v) for v in body.get("ExpressionAttributeValues", {}).values())
        return stored  # Delete, DeleteRequest, ConditionCheck

    def stored_size(self, table: str, key: dict[str, Any]) -> int:
        if self.sizer is None:
            return item_size(key)
        return item_size(self.sizer(table, key) or key)

    def snapshot(self) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]], int, int]:
        with self.lock:
            return Counter(self.calls), Counter(self.units), self.write_units, self.heartbeat_items


def stored_item_reader(runtime: Any) -> Callable[[str, dict[str, Any]], dict[str, Any] | None]:
    """Reads an item from moto's store in this process, in the turn the endpoint gives DynamoDB calls: the
    size of what a write replaces is then counted without an HTTP call on the handler's thread (which the
    latencies measured here would include)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][runtime.settings.region]
    lock = runtime.moto.dynamodb_lock

    def read(table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        with lock:
            item = backend.get_item(table, key)
            return None if item is None else dict(item.to_json()["Attributes"])

    return read


def is_heartbeat_write(params: dict[str, Any]) -> bool:
    """An UpdateItem of a cluster record that sets a node's heartbeat_at and nothing else."""
    names = list(params.get("ExpressionAttributeNames", {}).values())
    sets_one = str(params.get("UpdateExpression", "")).count("=") == 1
    return len(names) == 3 and {"nodes", "heartbeat_at"} <= set(names) and sets_one


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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


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


def print_parts(title: str, samples: list[dict[str, float]], ms: Callable[[list[float], float], str]) -> None:
    print(f"  {title} (p50 / p99 of each part):")
    for part in dict.fromkeys(k for parts in samples for k in parts):
        values = [parts[part] for parts in samples if part in parts]
        print(f"    {part:48s} {ms(values, 50)}  {ms(values, 99)}")


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


def report(result: dict[str, Any]) -> None:
    jobs = result["jobs"]
    calls: Counter[tuple[str, str]] = result["calls"]
    units: Counter[tuple[str, str]] = result["units"]

    def per_job(selector: Callable[[tuple[str, str]], bool], source: Counter[tuple[str, str]]) -> float:
        return sum(n for key, n in source.items() if selector(key)) / jobs

    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q) * 1000:7.1f} ms"

    print(
        f"jobs: {jobs} simple (1 node) -> {result['simple_states']}; "
        f"{result['preemptions']} spot jobs preempted once -> {result['spot_states']}"
    )
    print()
    print("latency (local runtime, this machine)")
    print(
        f"  submit -> launch request          p50 {ms(result['submit_latency'], 50)}   "
        f"p99 {ms(result['submit_latency'], 99)}"
    )
    if result.get("submit_parts"):
        print_parts("where a submission's time goes", result["submit_parts"], ms)
    if result["preempt_latency"]:
        print(
            f"  preemption -> replacement launch  p50 {ms(result['preempt_latency'], 50)}   "
            f"p99 {ms(result['preempt_latency'], 99)}"
        )
    if result.get("preempt_parts"):
        print("  where a preemption's time goes (p50 / p99 of each part, over the preempted jobs):")
        for part in dict.fromkeys(k for parts in result["preempt_parts"] for k in parts):
            values = [parts[part] for parts in result["preempt_parts"] if part in parts]
            print(f"    {part:48s} {ms(values, 50)}  {ms(values, 99)}")
        print("  the steps inside (p50 / p99 per call, calls per preemption):")
        for step, values in result["preempt_steps"].items():
            per = len(values) / max(1, result["preemptions"])
            print(f"    {step:48s} {ms(values, 50)}  {ms(values, 99)}  x{per:.1f}")
    print()
    print("AWS calls per simple job lifecycle (submit .. teardown), control plane only")
    by_service: dict[str, list[tuple[str, float]]] = {}
    for (service, operation), count in sorted(calls.items()):
        by_service.setdefault(service, []).append((operation, count / jobs))
    for service, operations in by_service.items():
        listed = ", ".join(f"{op} {n:.2f}" for op, n in operations)
        print(f"  {service:9s} {sum(n for _, n in operations):6.2f}  ({listed})")

    ddb_write_calls = per_job(lambda k: k[0] == "dynamodb" and k[1] in DYNAMODB_WRITES, calls)
    ddb_writes = per_job(lambda k: k[0] == "dynamodb" and k[1] in DYNAMODB_WRITES, units)
    ddb_write_units = result["write_units"] / jobs
    ddb_reads = per_job(lambda k: k[0] == "dynamodb" and k[1] in DYNAMODB_READS, units)
    messages = per_job(lambda k: k[0] == "sqs" and k[1] in ("SendMessage", "SendMessageBatch"), units)
    sqs_handler = per_job(lambda k: k[0] == "sqs" and k not in DISPATCHER_OPERATIONS, calls)
    sqs_poller = per_job(lambda k: k in DISPATCHER_OPERATIONS, calls)
    s3_puts = per_job(lambda k: k[0] == "s3" and k[1] in S3_PUTS, calls)
    s3_gets = per_job(lambda k: k[0] == "s3" and k[1] not in S3_PUTS, calls)
    invocations = sum(result["handler_calls"].values()) / jobs
    api_invocations = result["api_requests"] / jobs
    handler_gb_s = sum(result["handler_seconds"].values()) / jobs * LAMBDA_MEMORY_GB
    print()
    beats = result["heartbeat_items"] / jobs
    print(
        f"  DynamoDB writes      {ddb_write_calls:.2f} calls, {ddb_writes:.2f} items written, "
        f"{ddb_write_units:.2f} billed write units (1 KB steps, x2 in transactions)"
    )
    print(
        f"    of the items: {ddb_writes - beats:.2f} the job's steps (target <= 12) + {beats:.2f} heartbeat "
        "writes (a report >= silent_after/3 after the last one recorded: agents this script plays late)"
    )
    print(f"  DynamoDB read units  {ddb_reads:.2f}")
    print(f"  queue messages sent  {messages:.2f}  (target <= 6)")
    print(
        f"  SQS requests         {sqs_handler:.2f} by handlers/API + {sqs_poller:.2f} by the poller "
        "(Receive/Delete; Lambda's event source mapping bills these too, and its empty polls)"
    )
    print(
        f"  S3 requests          {s3_puts:.2f} PUT/LIST + {s3_gets:.2f} GET (+ 1 log chunk POST per node "
        "by the agent, not counted above)"
    )
    print(f"  Lambda invocations   {invocations:.2f} queue/schedule + {api_invocations:.2f} API requests")
    for kind, total in sorted(result["handler_seconds"].items()):
        count = result["handler_calls"][kind]
        mean_ms = total / count * 1000
        print(f"    {kind:10s} {count / jobs:.2f} invocations/job, {mean_ms:.1f} ms mean per batch")

    p = PRICES
    cost = {
        "DynamoDB": ddb_write_units * p["dynamodb_write_per_million"] / 1e6
        + ddb_reads * p["dynamodb_read_per_million"] / 1e6,
        "SQS": (sqs_handler + sqs_poller) * p["sqs_request_per_million"] / 1e6,
        "S3": (s3_puts + 1) * p["s3_put_per_thousand"] / 1e3 + s3_gets * p["s3_get_per_thousand"] / 1e3,
        "Lambda": (invocations + api_invocations) * p["lambda_request_per_million"] / 1e6
        + handler_gb_s * p["lambda_gb_second_arm64"],
        "API Gateway": api_invocations * p["http_api_request_per_million"] / 1e6,
    }
    print()
    print("control-plane dollars per 1,000 simple jobs (us-east-1 list prices, free tiers ignored)")
    for name, dollars in cost.items():
        print(f"  {name:12s} ${dollars * 1000:.5f}")
    print(f"  {'total':12s} ${sum(cost.values()) * 1000:.5f}")
    print("  (handler GB-s measured here at 512 MB; API function GB-s not included; heartbeats of long jobs")
    print("   add one API request + its writes every heartbeat_seconds per node; reconcile is a fixed")
    print("   1,440 invocations/day, independent of the number of jobs)")
    print("  prices: " + ", ".join(f"{k}={v}" for k, v in p.items()))


def run_figures(result: dict[str, Any]) -> dict[str, float]:
    """The figures compared across runs: latency percentiles (seconds) and items written a simple job."""
    items = sum(
        n for (service, op), n in result["units"].items() if service == "dynamodb" and op in DYNAMODB_WRITES
    )
    return {
        "submit p50": percentile(result["submit_latency"], 50),
        "submit p99": percentile(result["submit_latency"], 99),
        "preemption p50": percentile(result["preempt_latency"], 50),
        "preemption p99": percentile(result["preempt_latency"], 99),
        "items a job": (items - result["heartbeat_items"]) / max(1, result["jobs"]),
    }


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
