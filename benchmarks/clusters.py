"""Named clusters: exec latency on a running cluster, and what an idle cluster costs the control plane.

Runs the local runtime in this process (moto server, the Chalice API over HTTP, the dispatcher with the real
handlers) and one local-cloud cluster whose node runs the real agent in cluster mode. Then:

1. exec latency: N times, `exec` a command that writes the time it started, and measure from just before the
   API call to (a) the API's answer, (b) the command starting on the node, (c) the API reporting SUCCEEDED.
   The floor, measured in the same run, is starting the same command with `bash -c` here (no control plane).
2. idle cost: the cluster sits idle for a window while every AWS call the control plane makes is counted
   (botocore hooks); per agent poll that is the API request, its DynamoDB reads and the heartbeat writes
   (every silent_after/3 = 20 s). Extrapolated to a day per node and priced at AWS list prices (API Gateway
   HTTP API, Lambda at the API function's 512 MB for the measured handler time of a poll, DynamoDB
   on-demand). The Lambda time is measured here against moto; in AWS it differs (DynamoDB's own latency).

    .venv/bin/python benchmarks/clusters.py                        # 20 execs, polls every 2 s, 30 s idle
    .venv/bin/python benchmarks/clusters.py --execs 50 --poll-seconds 1 --idle-seconds 60

Prints the figures, a table of idle cost by poll interval, and the same cluster's VM price for scale.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aws_call_counts import CallCounter, item_size
from control_plane_report import PRICES, percentile

TASK = "name: bench\nresources:\n  cpus: 2+\nsetup: echo setup\nrun: echo up\n"
SECONDS_PER_DAY = 86400
LAMBDA_MEMORY_GB = 0.5  # infra/template.yaml: the API function's MemorySize 512
SQS_LONG_POLL_SECONDS = 20


def wait(what: Any, timeout: float = 60, every: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError("condition never met")


def floor_seconds(runs: int, folder: Path) -> list[float]:
    """Starting the command with bash here: what no control plane can beat."""
    found = []
    for _ in range(runs):
        started = time.time()
        subprocess.run(["bash", "-c", f"date +%s.%N >> {folder}/floor"], check=True)
        found.append(float((folder / "floor").read_text().split()[-1]) - started)
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["SKYLESS_CLUSTER_POLL_SECONDS"] = str(args.poll_seconds)
    os.environ["SKYLESS_LOG_FLUSH_SECONDS"] = "0.5"
    from local_runtime.daemon import LocalRuntime
    from local_runtime.moto_endpoint import free_port
    from shared.clouds.local import LocalCloud
    from shared.clusters import agents
    from shared.clusters.tokens import cluster_agent_token
    from shared.store.cluster_records import ClusterStore

    polls: list[float] = []  # the poll operation's own time, as the API function runs it
    poll_cluster = agents.poll_cluster

    def timed_poll(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return poll_cluster(*args, **kwargs)
        finally:
            polls.append(time.perf_counter() - started)

    agents.poll_cluster = timed_poll  # type: ignore[assignment]

    counter = CallCounter()
    counter.install()
    home = Path(tempfile.mkdtemp(prefix="skyless-bench-clusters-"))
    runtime = LocalRuntime(home, free_port(), free_port(), schedules={}, snapshot_every=None)
    info = runtime.start()
    api = httpx.Client(base_url=info.api_url, timeout=60, headers={"Authorization": f"Bearer {info.api_key}"})
    try:
        answer = api.post("/clusters/bench/launch", json={"task": TASK, "filename": "bench.yaml"})
        answer.raise_for_status()
        state = lambda n: api.get("/clusters/bench/queue").json()["jobs"][-n]["state"]  # noqa: E731
        wait(lambda: state(1) == "SUCCEEDED", timeout=120, every=0.2)
        store = ClusterStore(runtime.settings)
        cluster = store.by_name("u-local", "bench")
        sandbox = LocalCloud(home).node_home(cluster.provider_cluster, 0)

        # -- exec latency ---------------------------------------------------------------------------
        answered, started, succeeded = [], [], []
        phases = random.Random(12)
        for _ in range(args.execs):
            time.sleep(phases.uniform(0.2, 0.2 + args.poll_seconds))  # land at any phase of the poll cycle
            t0 = time.time()
            reply = api.post("/clusters/bench/exec", json={"command": "date +%s.%N >> ~/starts"})
            t1 = time.time()
            reply.raise_for_status()
            number = reply.json()["job"]
            count = len(started) + 1
            path = sandbox / "starts"
            wait(lambda: path.exists() and len(path.read_text().split()) >= count)  # noqa: B023
            began = float(path.read_text().split()[-1])
            url = "/clusters/bench/queue"
            wait(lambda: next(j for j in api.get(url).json()["jobs"] if j["job"] == number)["state"]  # noqa: B023
                 == "SUCCEEDED", every=0.02)  # fmt: skip
            t3 = time.time()
            answered.append(t1 - t0)
            started.append(began - t0)
            succeeded.append(t3 - t0)
        floor = floor_seconds(args.execs, home)

        # -- idle cost ------------------------------------------------------------------------------
        wait(lambda: store.get(cluster.key).idle_since is not None, timeout=30, every=0.2)
        time.sleep(1)
        before, _, before_wru = counter.snapshot()
        polls_before = len(polls)
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        window = time.monotonic() - t0
        after, _, after_wru = counter.snapshot()
        idle_polls = polls[polls_before:]
        calls = after - before
        ddb = runtime.settings
        import boto3

        dynamodb = boto3.client("dynamodb", region_name=ddb.region, endpoint_url=info.aws_endpoint_url,
                                aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
        key = {"pk": {"S": f"cluster#{cluster.key}"}, "sk": {"S": "cluster"}}
        table = ddb.table_name("named-clusters")
        record_bytes = item_size(dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"])
        # A poll as the API function serves it: authentication's read, the poll, the answer (over HTTP here).
        token = cluster_agent_token(runtime.settings, cluster.key)
        node = next(iter(store.get(cluster.key).nodes.as_dict()))
        body = {"instance_id": node, "have": list(range(1, args.execs + 2)), "running": [], "sessions": 0}
        round_trips = []
        for _ in range(args.samples):
            t = time.perf_counter()
            api.post(f"/cluster-agent/{cluster.key}/poll", json=body,
                     headers={"Authorization": f"Bearer {token}"}).raise_for_status()  # fmt: skip
            round_trips.append(time.perf_counter() - t)
    finally:
        api.close()
        runtime.stop()
        shutil.rmtree(home, ignore_errors=True)
    return {
        "answered": answered,
        "started": started,
        "succeeded": succeeded,
        "floor": floor,
        "window": window,
        "calls": calls,
        "write_units": after_wru - before_wru,
        "record_bytes": record_bytes,
        "polls": len(idle_polls),
        "handler": round_trips,
        "hourly_price": float(cluster.hourly_price or 0),
        "place": f"{cluster.cloud}/{cluster.region} {cluster.instance_type}",
    }


def idle_cost_per_day(
    poll_seconds: float, handler_seconds: float, read_units: float, write_units_per_day: float
) -> dict[str, float]:
    polls = SECONDS_PER_DAY / poll_seconds
    billed_ms = math.ceil(handler_seconds * 1000) / 1000
    return {
        "API Gateway": polls * PRICES["http_api_request_per_million"] / 1e6,
        "Lambda requests": polls * PRICES["lambda_request_per_million"] / 1e6,
        "Lambda time": polls * billed_ms * LAMBDA_MEMORY_GB * PRICES["lambda_gb_second_arm64"],
        "DynamoDB reads": polls * read_units * PRICES["dynamodb_read_per_million"] / 1e6,
        "DynamoDB writes": write_units_per_day * PRICES["dynamodb_write_per_million"] / 1e6,
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q) * 1000:7.0f} ms"

    print(
        f"exec latency on a running cluster ({args.execs} execs, agents poll every {args.poll_seconds:g} s):"
    )
    for label, key in (("API answered (job queued)", "answered"), ("command started on the node", "started"),
                       ("API says SUCCEEDED", "succeeded"), ("floor: bash -c here", "floor")):  # fmt: skip
        values = result[key]
        print(f"  {label:30s} p50 {ms(values, 50)}   p90 {ms(values, 90)}   max {ms(values, 100)}")
    ratio = statistics.median(result["started"]) / max(statistics.median(result["floor"]), 1e-6)
    print(f"  started vs floor (p50): {ratio:.0f}x; the poll interval bounds it (mean wait ~ poll/2)")

    calls = result["calls"]
    window = result["window"]
    polls = result["polls"]
    reads = calls.get(("dynamodb", "GetItem"), 0)
    writes = sum(calls.get(("dynamodb", op), 0) for op in ("UpdateItem", "PutItem", "TransactWriteItems"))
    other = {k: v for k, v in calls.items() if k[0] == "dynamodb" and k[1] not in ("GetItem", "UpdateItem")}
    rru = math.ceil(result["record_bytes"] / 4096)
    print(f"\nidle cluster, {window:.0f} s window, 1 node: {polls} polls, {reads} consistent GetItem")
    print(f"  (the record is {result['record_bytes']} B = {rru} RRU each), {writes} heartbeat write(s) "
          f"({result['write_units']} WRU); not the cluster's: {dict(other) or 'none'}")  # fmt: skip
    handler = statistics.median(result["handler"])
    samples = len(result["handler"])
    print(f"  one poll over HTTP here (auth read + poll; p50 of {samples}), billed as Lambda time: "
          f"{handler * 1000:.1f} ms")  # fmt: skip
    wru_per_day = result["write_units"] / window * SECONDS_PER_DAY
    reads_per_poll = reads / max(polls, 1)
    measured = idle_cost_per_day(window / max(polls, 1), handler, rru * reads_per_poll, wru_per_day)
    total = sum(measured.values())
    print(f"  per idle cluster-day (1 node), at list prices: ${total:.4f}")
    for name, value in measured.items():
        print(f"    {name:18s} ${value:.4f}")
    vm_day = result["hourly_price"] * 24
    print(f"  for scale: the node itself ({result['place']}) costs ${vm_day:.2f}/day: the control plane adds "
          f"{total / vm_day * 100:.1f}%")  # fmt: skip
    print("\nby poll interval (exec start waits ~ half of it on average):")
    for seconds in (1, 2, 5, 10, 30):
        cost = sum(idle_cost_per_day(seconds, handler, rru * reads_per_poll, wru_per_day).values())
        print(f"  every {seconds:>2} s: ${cost:.4f}/day   ${cost * 30:.2f}/month")
    sqs = SECONDS_PER_DAY / SQS_LONG_POLL_SECONDS * PRICES["sqs_request_per_million"] / 1e6
    heartbeats = wru_per_day * PRICES["dynamodb_write_per_million"] / 1e6
    print(f"  (not built: agents long-polling an SQS queue of their own, {SQS_LONG_POLL_SECONDS} s waits: "
          f"${sqs + heartbeats:.4f}/day; nodes would need AWS credentials)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--execs", type=int, default=20)
    parser.add_argument("--poll-seconds", type=float, default=2.0)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--samples", type=int, default=50, help="polls timed over HTTP")
    args = parser.parse_args()
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log
    report(run(args), args)


if __name__ == "__main__":
    main()
