"""The HTTPS API: cold start of its Lambda module, and per-route latency and AWS calls when warm.

Cold start: a fresh Python process imports `functions.submit.app` (what Lambda does on a cold start) and
answers one request through Chalice's own handler; measured N times, median reported.
Warm: the app served over real HTTP (the local runtime's ApiServer) against a moto server; each route
called `--requests` times through `cli.api_client.SkylessClient`; p50/p95 latency and the botocore calls
(DynamoDB, SQS, S3) one request makes, counted through botocore's `before-call` event.

    .venv/bin/python benchmarks/api_latency.py [--requests 50] [--cold-runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import botocore.session

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASK = "name: bench\nresources:\n  cpus: 2+\nrun: echo hi\n"
COLD_SNIPPET = """
import time, json
t0 = time.perf_counter()
from functions.submit.app import app
from chalice.test import Client
t1 = time.perf_counter()
with Client(app) as client:
    client.http.get("/openapi.json")
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first_request": t2 - t1}))
"""


class CallCounter:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        original = botocore.session.Session.create_client

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            client.meta.events.register("before-call", self.on_call)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]

    def on_call(self, model: Any, **_: Any) -> None:
        with self.lock:
            self.calls[f"{model.service_model.service_name}.{model.name}"] += 1

    def take(self) -> Counter[str]:
        with self.lock:
            taken, self.calls = self.calls, Counter()
        return taken


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cold_start(runs: int) -> None:
    imports, firsts = [], []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", COLD_SNIPPET], capture_output=True, text=True, env=env,
                             cwd=str(ROOT), check=True).stdout  # fmt: skip
        figures = json.loads(out.strip().splitlines()[-1])
        imports.append(figures["import"])
        firsts.append(figures["first_request"])
    imported, first = statistics.median(imports) * 1000, statistics.median(firsts) * 1000
    print(f"cold start ({runs} fresh processes, median): import functions.submit.app {imported:.0f} ms, "
          f"first request {first:.0f} ms")  # fmt: skip


def warm_routes(requests: int) -> None:
    counter = CallCounter()
    from moto.server import ThreadedMotoServer

    moto_port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
    moto.start()
    home = Path(tempfile.mkdtemp(prefix="skyless-bench-"))
    os.environ.update({
        "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}", "SKYLESS_PREFIX": "bench",
        "SKYLESS_HOME": str(home),
    })  # fmt: skip
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from cli.api_client import SkylessClient
    from functions.submit.app import app
    from local_runtime.api_server import ApiServer
    from shared.config import Settings
    from shared.stack import create_stack
    from shared.store.users import create_user
    from shared.wiring import wiring_for

    settings = Settings.from_env()
    create_stack(settings)
    server = ApiServer(app, "127.0.0.1", _free_port())
    server.start()
    try:
        client = SkylessClient(server.url, create_user("bench", settings))
        job_id = client.submit_job(TASK).job_id
        wiring_for(settings).objects.put_text(f"runs/{job_id}/logs/0/000-000001", "hello\n")
        routes: dict[str, Callable[[], Any]] = {
            "POST /jobs": lambda: client.submit_job(TASK),
            "GET /jobs": client.list_jobs,
            "GET /jobs/{id}": lambda: client.get_job(job_id),
            "GET /jobs/{id}/logs": lambda: client.read_logs(job_id),
            "POST /plan": lambda: client.plan(TASK),
            "POST /uploads": client.create_upload,
            "GET /openapi.json": client.openapi,
        }
        print(f"warm, over HTTP against moto ({requests} requests per route):")
        print(f"  {'route':<20} {'p50 ms':>7} {'p95 ms':>7}  AWS calls per request")
        for name, call in routes.items():
            call()  # warm the route's code paths and clients
            counter.take()
            times = []
            for _ in range(requests):
                started = time.perf_counter()
                call()
                times.append(time.perf_counter() - started)
            calls = counter.take()
            per = ", ".join(f"{op} {n / requests:g}" for op, n in sorted(calls.items())) or "none"
            p95 = statistics.quantiles(times, n=20)[18] if len(times) >= 20 else max(times)
            print(f"  {name:<20} {statistics.median(times) * 1000:7.1f} {p95 * 1000:7.1f}  {per}")
        client.close()
    finally:
        server.stop()
        moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()
    cold_start(args.cold_runs)
    warm_routes(args.requests)


if __name__ == "__main__":
    main()
