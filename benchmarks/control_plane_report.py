"""benchmarks/control_plane.py's report: latencies and where their time goes, AWS calls per simple job, and
what they cost at list prices; and the figures a run of `--runs N` compares."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from aws_call_counts import DISPATCHER_OPERATIONS, DYNAMODB_READS, DYNAMODB_WRITES, S3_PUTS

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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def print_parts(title: str, samples: list[dict[str, float]], ms: Callable[[list[float], float], str]) -> None:
    print(f"  {title} (p50 / p99 of each part):")
    for part in dict.fromkeys(k for parts in samples for k in parts):
        values = [parts[part] for parts in samples if part in parts]
        print(f"    {part:48s} {ms(values, 50)}  {ms(values, 99)}")


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
