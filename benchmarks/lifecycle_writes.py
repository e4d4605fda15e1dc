"""DynamoDB writes and queue messages of one simple 1-node job, counted at the botocore client.

Drives the lifecycle operations and the real handlers directly (no API, no dispatcher) against a moto
server, with the local cloud running a sleeping stand-in per node; the node's reports (setting_up,
running, one heartbeat, succeeded) are made through the operation the API calls.

    .venv/bin/python benchmarks/lifecycle_writes.py [--jobs 5]

Target (the design's budget): <= 12 DynamoDB writes and <= 6 queue messages per simple job.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import botocore.client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
SENDS = {"SendMessage", "SendMessageBatch"}
TASK = "name: bench\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: echo hi\n"
CALLS: Counter[str] = Counter()


def counting(original: Any) -> Any:
    def make_api_call(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        CALLS[f"{self.meta.service_model.service_name}:{operation_name}"] += 1
        return original(self, operation_name, api_params)

    return make_api_call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5)
    jobs = parser.parse_args().jobs

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    home = Path(tempfile.mkdtemp(prefix="skyless-bench-"))
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", SKYLESS_PREFIX=f"b{uuid.uuid4().hex[:8]}",
        SKYLESS_HOME=str(home), SKYLESS_PROVIDERS="*=local", SKYLESS_API_URL="http://127.0.0.1:9",
        SKYLESS_AGENT_SECRET="bench",
        SKYLESS_LOCAL_AGENT_COMMAND=json.dumps([sys.executable, "-c", "import time; time.sleep(600)"]),
    )  # fmt: skip
    from functions.optimize.handler import handler as optimize
    from functions.provision.handler import handler as provision
    from shared.clouds.local import LocalCloud
    from shared.config import Settings
    from shared.jobs.agent_reports import report_agent_status
    from shared.jobs.submission import submit_job
    from shared.jobs.views import get_job
    from shared.stack import aws_client, create_stack

    settings = Settings.from_env()
    create_stack(settings)
    sqs = aws_client("sqs", settings)

    def deliver(kind: str, handler: Any) -> None:
        url = sqs.get_queue_url(QueueName=settings.queue_name(kind))["QueueUrl"]
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        records = [{"messageId": m["MessageId"], "body": m["Body"]} for m in messages]
        handler({"Records": records}, None)

    client_class = botocore.client.BaseClient
    client_class._make_api_call = counting(client_class._make_api_call)  # type: ignore[method-assign]
    try:
        per_job: list[Counter[str]] = []
        for _ in range(jobs):
            before = Counter(CALLS)
            job_id = submit_job(settings, owner="bench", task_text=TASK).job_id
            deliver("optimize", optimize)
            deliver("provision", provision)
            view = get_job(settings, job_id, owner=None)
            instance_id = view.cluster["nodes"][0]["instance_id"]  # type: ignore[index]
            for phase in ("setting_up", "running", "heartbeat", "succeeded"):
                report_agent_status(settings, job_id, instance_id=instance_id, phase=phase, exit_code=0)
            deliver("provision", provision)
            assert get_job(settings, job_id, owner=None).state == "SUCCEEDED"
            per_job.append(CALLS - before)
    finally:
        cloud = LocalCloud(home)
        for cluster_id in {n.cluster_id for n in cloud.list_owned()}:
            cloud.terminate(cluster_id)
        server.stop()

    def mean(names: set[str], service: str) -> float:
        return sum(sum(c[f"{service}:{n}"] for n in names) for c in per_job) / len(per_job)

    # get_job and the receive/delete calls above are the test harness's, not the lifecycle's.
    print(f"jobs: {jobs}  (1 node, spot, reports: setting_up, running, 1 heartbeat, succeeded)")
    print(f"DynamoDB write calls per job: {mean(WRITES, 'dynamodb'):.1f}   (budget 12)")
    print(f"queue messages per job:       {mean(SENDS, 'sqs'):.1f}   (budget 6)")
    detail = Counter()
    for c in per_job:
        detail.update({k: v for k, v in c.items() if k.split(":")[1] in WRITES | SENDS})
    for name, count in sorted(detail.items()):
        print(f"  {name:<32} {count / jobs:.1f}")


if __name__ == "__main__":
    main()
