"""Burst: N real submissions at once through the local runtime reaching RUNNING, with the teardowns of other
jobs that finish meanwhile timed beside them (issue 20: no teardown delayed more than 30 s by a burst).

Runs the local runtime in this process (moto's server, the Chalice API over HTTP, the dispatcher with the
real handlers and its queues, the `local` cloud with a `sleep` process per node) and plays the node agents'
part over HTTP, as benchmarks/control_plane.py does. First `--finishing` jobs are brought to RUNNING; then
`--jobs` jobs are submitted through `POST /jobs` as fast as `--submitters` threads can (none waits for a
launch), and `--players` threads play each to RUNNING as its launch arrives; meanwhile one finishing job
ends every `--finish-every` seconds (its agent reports success), and the time from that report until its
cluster record is TERMINATED (the provision function's teardown has terminated its nodes) is its teardown
delay.

    .venv/bin/python benchmarks/burst.py --jobs 1000
    .venv/bin/python benchmarks/burst.py --jobs 200 --finishing 10 --json

Prints min / median / max of submit -> RUNNING and of the teardown delays, and the burst's wall time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from control_plane import SIMPLE_TASK, AgentPlayer, LaunchLog, patch_local_cloud

TEARDOWN_TARGET_SECONDS = 30.0


def spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def cluster_state(client: Any, table: str, cluster_id: str) -> str | None:
    item = client.get_item(TableName=table, Key={"cluster_id": {"S": cluster_id}}, ConsistentRead=True)
    return (item.get("Item") or {}).get("state", {}).get("S")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from local_runtime.daemon import LocalRuntime
    from local_runtime.local_settings import local_client
    from local_runtime.node_control import queue_depths

    for noisy in ("werkzeug", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    launches = LaunchLog()
    patch_local_cloud(launches)
    home = Path(tempfile.mkdtemp(prefix="skyless-burst-"))
    runtime = LocalRuntime(home, args.moto_port, args.api_port, schedules={}, snapshot_every=None)
    info = runtime.start()
    api = httpx.Client(
        base_url=info.api_url, timeout=120, headers={"Authorization": f"Bearer {info.api_key}"}
    )
    player = AgentPlayer(info.api_url)
    dynamodb = local_client("dynamodb", runtime.settings)
    clusters_table = runtime.settings.table_name("clusters")
    submit_lock = threading.Lock()

    def submit() -> tuple[str, float]:
        started = time.monotonic()
        answer = api.post("/jobs", json={"task": SIMPLE_TASK, "filename": "burst.yaml"})
        answer.raise_for_status()
        return answer.json()["job_id"], started

    def to_running(job_id: str) -> tuple[Any, list[Any], float]:
        _, spec, nodes = launches.wait_for(job_id, 1, timeout=args.timeout)
        player.run_until_running(spec, nodes)
        return spec, nodes, time.monotonic()

    try:
        # -- jobs that will finish during the burst --------------------------------------------------------
        finishing = []
        for _ in range(args.finishing):
            job_id, _ = submit()
            spec, nodes, _ = to_running(job_id)
            finishing.append((spec, nodes))

        # -- the burst, with teardowns beside it --------------------------------------------------------
        submitted: dict[str, float] = {}
        running_at: dict[str, float] = {}
        teardowns: list[float] = []
        peak_provision = 0
        burst_started = time.monotonic()
        burst_over = threading.Event()

        def play(job_id: str) -> None:
            _, _, at = to_running(job_id)
            with submit_lock:
                running_at[job_id] = at

        def end_one(spec: Any, nodes: list[Any]) -> None:
            player.finish(spec, nodes)
            reported = time.monotonic()
            while cluster_state(dynamodb, clusters_table, spec.cluster_id) != "TERMINATED":
                if time.monotonic() - reported > args.timeout:
                    raise TimeoutError(f"{spec.cluster_id} never terminated")
                time.sleep(0.1)
            teardowns.append(time.monotonic() - reported)

        def finish_during_burst() -> None:
            with ThreadPoolExecutor(4) as pool:
                futures = []
                for spec, nodes in finishing:
                    if burst_over.wait(args.finish_every):
                        break
                    futures.append(pool.submit(end_one, spec, nodes))
                for future in futures:
                    future.result()

        def watch_queues() -> None:
            nonlocal peak_provision
            while not burst_over.wait(1.0):
                depths = {d.kind: d for d in queue_depths(runtime.settings)}
                provision = depths.get("provision")
                if provision is not None:
                    peak_provision = max(
                        peak_provision, provision.visible + provision.in_flight + provision.delayed
                    )

        finisher = threading.Thread(target=finish_during_burst, name="finisher")
        watcher = threading.Thread(target=watch_queues, name="queue-watch", daemon=True)
        finisher.start()
        watcher.start()
        with ThreadPoolExecutor(args.submitters) as submitters, ThreadPoolExecutor(args.players) as players:
            playing = []
            for job_id, started in submitters.map(lambda _: submit(), range(args.jobs)):
                submitted[job_id] = started
                playing.append(players.submit(play, job_id))
            submit_seconds = time.monotonic() - burst_started
            for future in playing:
                future.result()
        burst_seconds = time.monotonic() - burst_started
        burst_over.set()
        finisher.join()
    finally:
        api.close()
        runtime.stop()  # stops every local node it started, then the servers
        shutil.rmtree(home, ignore_errors=True)

    to_run = [running_at[j] - submitted[j] for j in running_at]
    return {
        "jobs": args.jobs,
        "submitters": args.submitters,
        "players": args.players,
        "reached_running": len(running_at),
        "submit_seconds": round(submit_seconds, 1),
        "burst_seconds": round(burst_seconds, 1),
        "submit_to_running": spread(to_run),
        "teardown_delay": spread(teardowns),
        "teardowns_over_target": sum(1 for t in teardowns if t > TEARDOWN_TARGET_SECONDS),
        "provision_queue_peak": peak_provision,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000, help="submissions in the burst (default 1000)")
    parser.add_argument("--finishing", type=int, default=20, help="jobs that end during it (default 20)")
    parser.add_argument("--finish-every", type=float, default=3.0, help="seconds between two of them")
    parser.add_argument("--submitters", type=int, default=16, help="threads submitting (POST /jobs)")
    parser.add_argument("--players", type=int, default=16, help="threads playing the agents of launched jobs")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds any one wait may take")
    parser.add_argument("--moto-port", type=int, default=int(os.environ.get("BURST_MOTO_PORT", "23101")))
    parser.add_argument("--api-port", type=int, default=int(os.environ.get("BURST_API_PORT", "23102")))
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the runtime and its nodes on the way out
    result = run(args)
    if args.json:
        print(json.dumps(result))
        return
    s, t = result["submit_to_running"], result["teardown_delay"]
    print(
        f"burst: {result['jobs']} submissions ({result['submitters']} at a time) in "
        f"{result['submit_seconds']} s, {result['reached_running']} reached RUNNING "
        f"in {result['burst_seconds']} s"
    )
    print(f"  submit -> RUNNING, s: min {s.get('min')} / median {s.get('median')} / max {s.get('max')}")
    print(
        f"  teardowns during the burst: {t['n']}, delay s: min {t.get('min')} / median {t.get('median')} "
        f"/ max {t.get('max')}; over {TEARDOWN_TARGET_SECONDS:.0f} s: {result['teardowns_over_target']}"
    )
    print(f"  provision queue peak: {result['provision_queue_peak']} messages")  # fmt: skip


if __name__ == "__main__":
    main()
