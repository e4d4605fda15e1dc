"""Plan latency: warm plans per kind of task, a 3-task chain, and cold start in a fresh process.

Usage: .venv/bin/python benchmarks/plan.py [--catalog DIR] [--repeat N] [--cold-runs N]

Catalogs: the built-in one, and a SkyPilot catalog folder (default ../shared/catalog/skypilot/v8
when it exists). "Warm" is the median and p99 of repeated plans in one process after a first plan
(index built). Two cold starts, each the median of several fresh interpreters:
- the core: import `shared.optimizer`, load the built-in catalog, return the first plan;
- the handler: import `functions.optimize.handler`, then call it with the SQS event of a submitted job
  against a moto server (job read, catalog load through the bucket, plan, job update, launch message),
  with the environment the SAM template's Globals give every function. Phases are reported apart:
  imports, catalog, the first handler call (AWS clients are created there, at first use).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.catalog.model import Catalog, load_default_catalog  # noqa: E402
from shared.optimizer import plan_pipeline, plan_task  # noqa: E402
from shared.task.requests import ResourceChoice, ResourceRequest  # noqa: E402

SHARED_CATALOG = ROOT.parent / "shared" / "catalog" / "skypilot" / "v8"

SINGLE_TASKS: dict[str, ResourceChoice] = {
    "one GPU (A100:1)": ResourceChoice((ResourceRequest(accelerator="A100", accelerator_count=1),)),
    "8xA100 any_of (A100, A100-80GB, H100)": ResourceChoice(
        tuple(ResourceRequest(accelerator=a, accelerator_count=8) for a in ("A100", "A100-80GB", "H100"))
    ),
    "CPU-only cpus 8+": ResourceChoice((ResourceRequest(cpus=8),)),
    "pinned region (cpus 8+, gcp/us-central1)": ResourceChoice(
        (ResourceRequest(cpus=8, cloud="gcp", region="us-central1"),)
    ),
    "spot (L4:1 use_spot)": ResourceChoice(
        (ResourceRequest(accelerator="L4", accelerator_count=1, use_spot=True),)
    ),
    "time objective (any_of A100:8, H100:8)": ResourceChoice(
        tuple(ResourceRequest(accelerator=a, accelerator_count=8) for a in ("A100", "H100"))
    ),
}


@dataclass
class ChainTask:
    name: str
    choice: ResourceChoice
    num_nodes: int = 1
    inputs: dict[str, float] | None = None
    outputs_gb: float = 0.0

    @property
    def inputs_gb(self) -> float:
        return next(iter(self.inputs.values())) if self.inputs else 0.0

    def resource_choice(self) -> ResourceChoice:
        return self.choice


@dataclass
class Chain:
    tasks: list[ChainTask] = field(default_factory=list)
    execution: str = "serial"


CHAIN = Chain(
    [
        ChainTask(
            "preprocess",
            ResourceChoice((ResourceRequest(cpus=16),)),
            inputs={"s3://bucket/raw": 500},
            outputs_gb=200,
        ),
        ChainTask(
            "train",
            ResourceChoice(
                tuple(ResourceRequest(accelerator=a, accelerator_count=8) for a in ("A100", "H100"))
            ),
            num_nodes=2,
            outputs_gb=50,
        ),
        ChainTask("serve", ResourceChoice((ResourceRequest(accelerator="L4", accelerator_count=1),))),
    ]
)


def time_calls(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples) * 1e3, samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3


def warm_figures(label: str, catalog: Catalog, repeat: int) -> None:
    print(f"\n{label}: {len(catalog)} offerings")
    print(f"  {'task':<44} {'median ms':>10} {'p99 ms':>8}  best")
    for name, choice in SINGLE_TASKS.items():
        minimize = "time" if name.startswith("time") else "cost"
        try:
            best = plan_task(choice, 1, catalog, minimize=minimize)[0]
        except Exception as error:  # a catalog without that hardware: say so, keep going
            print(f"  {name:<44} {'-':>10} {'-':>8}  {type(error).__name__}: {error}")
            continue
        median, p99 = time_calls(lambda c=choice, m=minimize: plan_task(c, 1, catalog, minimize=m), repeat)
        chosen = f"{best.place} {best.instance_type} ${best.hourly_price:g}/h"
        print(f"  {name:<44} {median:>10.3f} {p99:>8.3f}  {chosen}")
    try:
        plan = plan_pipeline(CHAIN, catalog)
    except Exception as error:
        label = "3-task chain, s3 input + egress"
        print(f"  {label:<44} {'-':>10} {'-':>8}  {type(error).__name__}: {error}")
        return
    median, p99 = time_calls(lambda: plan_pipeline(CHAIN, catalog), max(10, repeat // 10))
    places = " -> ".join(t.chosen.cloud for t in plan.tasks)
    chosen = f"{places} total ${plan.total_cost:.2f}"
    print(f"  {'3-task chain, s3 input + egress':<44} {median:>10.3f} {p99:>8.3f}  {chosen}")


COLD_SCRIPT = """
import time
start = time.perf_counter()
{handler}
from shared.optimizer import plan_task
from shared.task.requests import ResourceChoice, ResourceRequest
{load}
plan_task(ResourceChoice((ResourceRequest(accelerator="A100", accelerator_count=8),)), 1, catalog)
print(time.perf_counter() - start, time.process_time())
"""

LOAD_DEFAULT = "from shared.catalog.model import load_default_catalog\ncatalog = load_default_catalog()"
LOAD_FOLDER = (
    "from shared.catalog import Catalog, import_skypilot_catalog\n"
    "catalog = Catalog(import_skypilot_catalog({folder!r}))"
)


def cold_figures(label: str, load: str, runs: int) -> None:
    script = COLD_SCRIPT.format(load=load, handler="")
    inside, outside, cpu = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        command = [sys.executable, "-c", script]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
        outside.append(time.perf_counter() - start)
        wall, process_cpu = out.stdout.strip().splitlines()[-1].split()
        inside.append(float(wall))
        cpu.append(float(process_cpu))
    per_process, wall, cpu_ms = (statistics.median(x) * 1e3 for x in (outside, inside, cpu))
    print(
        f"  cold start, core (shared.optimizer), {label}: median {per_process:.0f} ms per process; "
        f"import + load + first plan {wall:.0f} ms wall, {cpu_ms:.0f} ms CPU of the process ({runs} runs)"
    )


HANDLER_SCRIPT = """
import json, os, sys, time
start = time.perf_counter()
from functions.optimize.handler import handler
imported = time.perf_counter()
from shared.wiring import current_wiring
current_wiring().catalog
loaded = time.perf_counter()
answer = handler({"Records": [json.loads(os.environ["BENCH_RECORD"])]}, None)
done = time.perf_counter()
assert answer == {"batchItemFailures": []}, answer
print(imported - start, loaded - imported, done - loaded, time.process_time())
"""
TEMPLATE_GLOBALS_ENV = ("PYDANTIC_DISABLE_PLUGINS",)  # what infra/template.yaml's Globals set, besides names
HANDLER_TASK = "name: bench\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo hi\n"


def handler_cold_figures(runs: int) -> None:
    """The optimize handler's real first invocation, in fresh processes, against a moto server."""
    import logging
    import tempfile

    from moto.server import ThreadedMotoServer

    from local_runtime.moto_endpoint import free_port
    from shared.aws.sessions import aws_client
    from shared.config import Settings
    from shared.jobs.submission import SubmitJob, submit_job
    from shared.stack import create_stack
    from shared.wiring import wiring_for

    fake = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update(fake)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        settings = Settings(
            prefix="bench",
            region="us-east-1",
            endpoint_url=f"http://127.0.0.1:{port}",
            home=Path(tempfile.mkdtemp(prefix="skyless-bench-")),
            providers="*=local",
        )
        create_stack(settings)
        sqs = aws_client("sqs", settings)
        url = sqs.get_queue_url(QueueName=settings.queue_name("optimize"))["QueueUrl"]
        template_env = {
            name: value for name, value in template_globals_env().items() if name in TEMPLATE_GLOBALS_ENV
        }
        for with_template_env in (False, True):
            phases: list[tuple[float, float, float, float]] = []
            outside = []
            for _ in range(runs):
                submit_job(wiring_for(settings), SubmitJob.from_text(owner="bench", task_text=HANDLER_TASK))
                (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                record = {"messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"],
                          "body": message["Body"], "attributes": {}, "messageAttributes": {},
                          "eventSource": "aws:sqs"}  # fmt: skip
                env = {**os.environ, **settings.to_env(), "AWS_ENDPOINT_URL": settings.endpoint_url or "",
                       "BENCH_RECORD": json.dumps(record)}  # fmt: skip
                env.pop("PYDANTIC_DISABLE_PLUGINS", None)
                if with_template_env:
                    env.update(template_env)
                start = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-c", HANDLER_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
                )
                outside.append(time.perf_counter() - start)
                if out.returncode != 0:
                    raise SystemExit(f"the handler run failed:\n{out.stderr[-2000:]}")
                a, b, c, d = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
                phases.append((a, b, c, d))
            imports, catalog, first_call, cpu = (
                statistics.median(p[i] for p in phases) * 1e3 for i in range(4)
            )
            label = (
                "with the template's Globals env " + str(template_env) if with_template_env else "bare env"
            )
            per_process = statistics.median(outside) * 1e3
            total = imports + catalog + first_call
            print(
                f"  cold start, handler (functions.optimize.handler), {label}: median {per_process:.0f} ms "
                f"per process; imports {imports:.0f} ms + catalog {catalog:.0f} ms + first invocation "
                f"{first_call:.0f} ms = {total:.0f} ms wall, {cpu:.0f} ms CPU of the process ({runs} runs)"
            )
    finally:
        server.stop()


def template_globals_env() -> dict[str, str]:
    from cfnlint.decode import decode

    parsed, _ = decode(str(ROOT / "infra" / "template.yaml"))
    variables = parsed["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHARED_CATALOG, help="a SkyPilot catalog folder")
    parser.add_argument("--repeat", type=int, default=500)
    parser.add_argument("--cold-runs", type=int, default=7)
    args = parser.parse_args()
    warm_figures("built-in catalog", load_default_catalog(), args.repeat)
    if args.catalog.is_dir():
        from shared.catalog.skypilot_import import import_skypilot_catalog

        start = time.perf_counter()
        full = Catalog(import_skypilot_catalog(args.catalog))
        print(f"\n(imported {args.catalog} in {(time.perf_counter() - start) * 1e3:.0f} ms)")
        warm_figures(f"SkyPilot catalog {args.catalog}", full, args.repeat)
    print()
    cold_figures("built-in catalog", LOAD_DEFAULT, args.cold_runs)
    if args.catalog.is_dir():
        cold_figures(f"{args.catalog.name} folder", LOAD_FOLDER.format(folder=str(args.catalog)), 3)
    handler_cold_figures(args.cold_runs)


if __name__ == "__main__":
    main()
