"""Cold start of every Lambda handler, next to the floor of the same run, as ratios.

Usage: .venv/bin/python benchmarks/cold_start.py [--catalog DIR] [--runs N] [--only NAME ...] [--profile N]

One moto server (started here) holds a stack; the full SkyPilot catalog (default
../shared/catalog/skypilot/v8) is imported into a fresh SKYLESS_HOME with `skyless catalog import`, as a
user would. For each handler the template names, a fresh interpreter imports it and calls it once with a
realistic event built against that stack (an optimize message of a just-recovered job (a job is planned at
submit, so a recovery's re-plan is what optimize does), a launch message of a just-submitted one on the AWS
provider against moto's EC2, a spot warning, an S3 upload delivered by
the bucket to the submit queue, an HTTP API payload 2.0 request, an events-stream record, the schedules),
with the environment the SAM template's Globals give a function. The stack serves AWS alone
(`SKYLESS_PROVIDERS=aws=aws`, the README's deploy), so `optimize` plans over AWS only; `optimize (any cloud)`
is a stack serving every cloud, planning an unpinned task over all of the catalog's 90k rows.

Cold start = the wall time inside that process from its first statement until the first invocation
returns (imports + first invocation; the interpreter's own start is left out, as it is the same for every
function). The floor is the same measure for `import boto3; boto3.client("sqs").list_queues()` against the
same endpoint, taken between the handler runs. Medians of --runs processes each. The CPU time of the same
span (the process's own work; the moto server runs in this process, as AWS would run elsewhere) is
printed as a second ratio: on a busy machine it moves far less than wall time.
"paired CPU ratio" is min/median/max over the runs of each run's CPU against the floor run just before it.

Every handler runs from bytecode, as the bundle ships it (infra/lambda_code/Makefile), whatever
PYTHONDONTWRITEBYTECODE says: the tree is compiled first, and the agent files user-data carries are
prebuilt into node_agent/prebuilt/ as the bundle's build does. Under the table, each handler's imports beyond
the floor's (`python -X importtime`, self time summed per package, the largest first; --imports N).

--profile NAME prints where a handler's time goes: `python -X importtime` (the slowest imports,
cumulative) and cProfile of the first invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED_CATALOG = ROOT.parent / "shared" / "catalog" / "skypilot" / "v8"
EVENTS = ROOT / "tests" / "events"
TARGETS = {"optimize": 1.3, "optimize (any cloud)": 1.3}  # issue 24
DEFAULT_TARGET = 1.5
AWS_TASK = "name: bench\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo hi\n"
ANY_CLOUD_TASK = "name: bench\nresources:\n  cpus: 2+\nrun: echo hi\n"
EVERY_PROVIDER = (("SKYLESS_PROVIDERS", "aws=aws,gcp=gcp,azure=azure,lambda=lambda,runpod=runpod"),)
FLOOR = "floor"

CHILD = """
import json, os, time
start, cpu_start = time.perf_counter(), time.process_time()
{imports}
imported = time.perf_counter()
answer = {call}
done = time.perf_counter()
cpu = time.process_time() - cpu_start
result = {{"imports": imported - start, "invocation": done - imported, "cpu": cpu, "answer": answer}}
print(json.dumps(result, default=str))
"""
FLOOR_IMPORTS = "import boto3"
FLOOR_CALL = 'boto3.client("sqs").list_queues()["ResponseMetadata"]["HTTPStatusCode"]'


@dataclass(frozen=True)
class Case:
    name: str
    module: str  # the template's Handler, "module.attribute"
    event: Callable[[], dict[str, Any]]  # a fresh realistic event (state is set up for it here)
    ok: Callable[[Any], bool]
    env: tuple[tuple[str, str], ...] = ()  # what this function's environment sets besides the stack's


def sqs_event(message: dict[str, Any], kind: str) -> dict[str, Any]:
    """A received message as Lambda's SQS event source delivers it."""
    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:coldstart-{kind}",
        "awsRegion": "us-east-1",
    }
    return {"Records": [record]}


def sqs_ok(answer: Any) -> bool:
    return answer == {"batchItemFailures": []}


class Bench:
    def __init__(self, catalog: Path | None) -> None:
        import compileall
        import logging

        for package in ("functions", "shared", "node_agent"):
            compileall.compile_dir(ROOT / package, quiet=1)
        from node_agent.user_data import PREBUILT, prebuild

        prebuild(PREBUILT)  # as the bundle's build does (infra/lambda_code/Makefile)

        from moto.server import ThreadedMotoServer

        from local_runtime.moto_endpoint import free_port
        from shared.config import Settings

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        fake = {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        os.environ.update(fake)
        port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self.server.start()
        home = Path(tempfile.mkdtemp(prefix="skyless-coldstart-"))
        self.settings = Settings(
            prefix="coldstart",
            region="us-east-1",
            endpoint_url=f"http://127.0.0.1:{port}",
            home=home,
            providers="aws=aws",
            api_url="https://api.example.test",
        )
        self.env = {
            **os.environ,
            **self.settings.to_env(),
            **template_globals_env(),
            "AWS_ENDPOINT_URL": self.settings.endpoint_url or "",
            "SKYLESS_AGENT_SECRET": "bench-agent-secret",
            "SKYLESS_AWS_REGIONS": "us-east-1",
            "SKYLESS_UPLOAD_OWNER": "u-bench",
        }
        os.environ.update({k: v for k, v in self.env.items() if k.startswith(("SKYLESS_", "AWS_"))})
        if catalog is not None:
            imported = subprocess.run(
                [str(Path(sys.executable).parent / "skyless"), "catalog", "import", str(catalog)],
                cwd=ROOT, env=self.env, capture_output=True, text=True,
            )  # fmt: skip
            if imported.returncode != 0:
                raise SystemExit(f"skyless catalog import failed:\n{imported.stdout}\n{imported.stderr}")
            print(imported.stdout.strip().splitlines()[-1] if imported.stdout.strip() else "catalog imported")
        from shared.aws.sessions import aws_client
        from shared.stack import create_stack
        from shared.store.users import create_user

        create_stack(self.settings)
        self.api_key = create_user("bench", self.settings, user_id="u-bench")
        self.sqs = aws_client("sqs", self.settings)

    def stop(self) -> None:
        import shutil

        self.server.stop()
        shutil.rmtree(self.settings.home, ignore_errors=True)

    def receive(self, kind: str, job_id: str | None = None, wait: int = 2) -> dict[str, Any]:
        """The next message on the queue (of `job_id` if given: what earlier runs left there is dropped)."""
        url = self.sqs.get_queue_url(QueueName=self.settings.queue_name(kind))["QueueUrl"]
        while True:
            answer = self.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=wait, MaxNumberOfMessages=1)
            (message,) = answer["Messages"]
            self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if "s3:TestEvent" in message["Body"]:
                continue
            if job_id is None or json.loads(message["Body"]).get("job_id") == job_id:
                return sqs_event(message, kind)

    def submitted(self, task: str = AWS_TASK) -> str:
        from shared.jobs.submission import SubmitJob, submit_job
        from shared.wiring import wiring_for

        return submit_job(
            wiring_for(self.settings), SubmitJob.from_text(owner="u-bench", task_text=task)
        ).job_id

    def optimize_event(self, task: str = AWS_TASK) -> dict[str, Any]:
        """A job is planned at submit: what the optimize function plans is a recovered job (its re-plan)."""
        from functions.provision.handler import handler
        from shared.jobs.recovery import recover_job
        from shared.wiring import wiring_for

        job_id = self.submitted(task)
        assert sqs_ok(handler(self.receive("provision", job_id), None))
        wiring = wiring_for(self.settings)
        job = wiring.store.get(job_id)
        assert job is not None and job.state == "SETTING_UP", job and job.state
        recover_job(wiring, job, "bench: spot taken away", preempted=True)
        return self.receive("optimize", job_id)  # (its old cluster's teardown is left on the queue)

    def provision_event(self) -> dict[str, Any]:
        return self.receive("provision", self.submitted())  # planned at submit: its launch request

    def submit_event(self) -> dict[str, Any]:
        from shared.aws.sessions import aws_client

        key = f"tasks/u-bench/bench-{time.time_ns()}.yaml"
        aws_client("s3", self.settings).put_object(
            Bucket=self.settings.bucket, Key=key, Body=AWS_TASK.encode()
        )
        return self.receive("submit")

    def api_event(self) -> dict[str, Any]:
        sys.path.insert(0, str(ROOT / "tests" / "integration"))
        from test_api_gateway import http_api_event

        return http_api_event("GET", "/jobs", headers={"authorization": f"Bearer {self.api_key}"})

    def notify_event(self) -> dict[str, Any]:
        from local_runtime.events_stream import EventsStreamReader

        self.submitted()
        records = EventsStreamReader(self.settings).poll()
        return {"Records": records[-1:]}

    def cases(self) -> list[Case]:
        spot = json.loads((EVENTS / "sqs_batch_of_spot_warning.json").read_text())
        scheduled = json.loads((EVENTS / "scheduled_event.json").read_text())
        return [
            Case("optimize", "functions.optimize.handler.handler", self.optimize_event, sqs_ok),
            Case(
                "optimize (any cloud)",
                "functions.optimize.handler.handler",
                lambda: self.optimize_event(ANY_CLOUD_TASK),
                sqs_ok,
                env=EVERY_PROVIDER,  # a stack serving every cloud plans over all of them
            ),
            Case("provision", "functions.provision.handler.handler", self.provision_event, sqs_ok),
            Case("spot_watch", "functions.spot_watch.handler.handler", lambda: spot, sqs_ok),
            Case("submit (S3 upload)", "functions.submit.handler.handler", self.submit_event, sqs_ok),
            Case(
                "api (GET /jobs)",
                "functions.submit.app.handler",
                self.api_event,
                lambda a: a["statusCode"] == 200,
            ),
            Case("notify", "functions.notify.handler.handler", self.notify_event, sqs_ok),
            Case("reconcile", "functions.reconcile.handler.handler", lambda: scheduled, lambda a: True),
            Case("reaper", "functions.reaper.handler.handler", lambda: scheduled, lambda a: True),
        ]

    def run_child(
        self,
        imports: str,
        call: str,
        event: dict[str, Any] | None,
        extra_env: tuple[tuple[str, str], ...] = (),
    ) -> dict[str, Any]:
        env = {**self.env, **dict(extra_env), "BENCH_EVENT": json.dumps(event)}
        script = CHILD.format(imports=imports, call=call)
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(f"a cold start run failed:\n{out.stderr[-3000:]}")
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))

    def floor(self) -> tuple[float, float]:
        result = self.run_child(FLOOR_IMPORTS, FLOOR_CALL, None)
        assert result["answer"] == 200
        return float(result["imports"] + result["invocation"]), float(result["cpu"])

    def handler_run(self, case: Case) -> tuple[float, float, float]:
        module, attribute = case.module.rsplit(".", 1)
        result = self.run_child(
            f"from {module} import {attribute} as entry",
            'entry(json.loads(os.environ["BENCH_EVENT"]), None)',
            case.event(),
            case.env,
        )
        if not case.ok(result["answer"]):
            raise SystemExit(f"{case.name} answered {result['answer']}")
        return float(result["imports"]), float(result["invocation"]), float(result["cpu"])


def template_globals_env() -> dict[str, str]:
    """The environment the SAM template's Globals give every function (names of resources left out)."""
    from cfnlint.decode import decode

    parsed, _ = decode(str(ROOT / "infra" / "template.yaml"))
    variables = parsed["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def measure(bench: Bench, cases: list[Case], runs: int) -> None:
    floors: list[float] = []
    floor_cpus: list[float] = []
    rows: list[tuple[str, float, float, float, float, float, float, float]] = []
    for case in cases:
        imports, calls, cpus, paired = [], [], [], []
        for _ in range(runs):
            wall, cpu = bench.floor()
            floors.append(wall)
            floor_cpus.append(cpu)
            i, c, p = bench.handler_run(case)
            imports.append(i)
            calls.append(c)
            cpus.append(p)
            paired.append(p / cpu)  # against the floor run just before it: the same moment's load
        totals = [i + c for i, c in zip(imports, calls, strict=True)]
        imports_s, call_s, total, cpu = (statistics.median(x) for x in (imports, calls, totals, cpus))
        rows.append(
            (case.name, imports_s, call_s, total, cpu, min(paired), statistics.median(paired), max(paired))
        )
    floor, floor_cpu = statistics.median(floors), statistics.median(floor_cpus)
    head = ("handler", "imports", "1st call", "wall", "ratio", "CPU", "ratio", "paired CPU ratio")
    print("{:<22} {:>8} {:>9} {:>8} {:>6} {:>7} {:>6}  {:<20} target".format(*head))
    for name, imports_s, call_s, total, cpu, low, middle, high in rows:
        target = TARGETS.get(name, DEFAULT_TARGET)
        ratio, cpu_ratio = total / floor, cpu / floor_cpu
        verdicts = ["met" if r <= target else "missed" for r in (ratio, cpu_ratio)]
        figures = f"{imports_s * 1e3:>6.0f}ms {call_s * 1e3:>7.0f}ms {total * 1e3:>6.0f}ms {ratio:>5.2f}x"
        cpu_figures = f"{cpu * 1e3:>5.0f}ms {cpu_ratio:>5.2f}x  {low:.2f}/{middle:.2f}/{high:.2f}x".ljust(36)
        print(f"{name:<22} {figures} {cpu_figures} <={target}x: wall {verdicts[0]}, CPU {verdicts[1]}")
    spread = f"{len(floors)} runs; wall {min(floors) * 1e3:.0f}-{max(floors) * 1e3:.0f} ms"
    floor_figures = f"{floor * 1e3:>6.0f}ms  1.00x {floor_cpu * 1e3:>5.0f}ms  1.00x"
    print(f"{'floor (boto3 + 1 call)':<22} {'':>8} {'':>9} {floor_figures}  ({spread})")


def import_times(bench: Bench, statement: str, extra_env: tuple[tuple[str, str], ...] = ()) -> dict[str, int]:
    """Self time (us) of each module `statement` imports, from `python -X importtime`."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        cwd=ROOT, env={**bench.env, **dict(extra_env)}, capture_output=True, text=True,
    )  # fmt: skip
    found = {}
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            self_us, _, name = (part.strip() for part in line[len("import time:") :].split("|"))
            found[name] = int(self_us)
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("shared", "functions", "pydantic", "botocore") else parts[0]


def imports_beyond_floor(bench: Bench, cases: list[Case], count: int) -> None:
    """What each handler imports that the floor does not: a cold start's share no SQS call explains."""
    floor = import_times(bench, f"{FLOOR_IMPORTS}; boto3.client('sqs')")
    print(f"\nimports beyond the floor's (python -X importtime: self ms summed per package, top {count})")
    for case in cases:
        module, attribute = case.module.rsplit(".", 1)
        mine = import_times(bench, f"from {module} import {attribute}", case.env)
        packages: dict[str, int] = {}
        for name, self_us in mine.items():
            if name not in floor:
                packages[package_of(name)] = packages.get(package_of(name), 0) + self_us
        top = sorted(packages.items(), key=lambda item: -item[1])[:count]
        total = sum(packages.values()) / 1e3
        listed = ", ".join(f"{name} {us / 1e3:.0f}" for name, us in top)
        print(f"  {case.name:<22} {total:5.0f} ms in {len(packages)} packages: {listed}")


def profile(bench: Bench, case: Case) -> None:
    module, attribute = case.module.rsplit(".", 1)
    env = {**bench.env, **dict(case.env), "BENCH_EVENT": json.dumps(case.event())}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"from {module} import {attribute}"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[len("import time:") :].split("|"))
        rows.append((int(cumulative_us), int(self_us), name))
    print(f"\n{case.name}: the slowest imports (cumulative ms, self ms), python -X importtime")
    for cumulative, self_time, name in sorted(rows, reverse=True)[:25]:
        print(f"  {cumulative / 1e3:8.1f} {self_time / 1e3:8.1f}  {name}")
    script = (
        "import cProfile, json, os, pstats\n"
        f"from {module} import {attribute} as entry\n"
        "event = json.loads(os.environ['BENCH_EVENT'])\n"
        "profiler = cProfile.Profile()\n"
        "profiler.runcall(entry, event, None)\n"
        "pstats.Stats(profiler).sort_stats(os.environ.get('BENCH_SORT', 'cumulative')).print_stats(30)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    print(f"\n{case.name}: the first invocation under cProfile (cumulative)")
    print("\n".join(out.stdout.splitlines()[:60]) or out.stderr[-3000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHARED_CATALOG, help="a SkyPilot catalog folder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="handler names (optimize, provision, ...)")
    parser.add_argument("--profile", help="a handler name: where its cold start goes")
    parser.add_argument("--imports", type=int, default=6, help="packages listed per handler (0: none)")
    args = parser.parse_args()
    if not args.catalog.is_dir():
        print(f"{args.catalog} is not a folder: the built-in catalog only (pass --catalog)", file=sys.stderr)
    bench = Bench(args.catalog if args.catalog.is_dir() else None)
    try:
        cases = bench.cases()
        if args.profile:
            profile(bench, next(c for c in cases if c.name.startswith(args.profile)))
            return
        if args.only:
            cases = [c for c in cases if any(c.name.startswith(name) for name in args.only)]
        measure(bench, cases, args.runs)
        if args.imports:
            imports_beyond_floor(bench, cases, args.imports)
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
