"""The proof of issue 23's budgets, as a user runs it on the local runtime: a job checkpoints every second to
a MOUNT_CACHED bucket; its owner's monthly budget (set with `skyless budget set`) is reached mid-job; the
periodic reconcile sends the 50/80/100 % notices to the user's Slack once each, and stops the job through
the preemption-notice path (the agent writes the last checkpoint back); the next `skyless launch` is refused
with the arithmetic. The bucket's periodic write-back is set far apart (10 min), so a checkpoint in the bucket
that matches the last step the task printed was written back at the notice."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from fakes.slack_webhook import SlackWebhook
from test_end_to_end_local import TERMINAL, Runtime

TASK = """\
name: budgeted-train
resources:
  cpus: 2
  use_spot: true
file_mounts:
  /ckpt:
    name: {bucket}
    mode: MOUNT_CACHED
    persistent: true
run: |
  step=$(cat /ckpt/step 2>/dev/null || echo 0)
  while [ "$step" -lt 900 ]; do
    sleep 1
    step=$((step + 1))
    echo "$step" > /ckpt/step
    echo "step $step"
  done
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime(tmp_path_factory.mktemp("skyless-home"))
    rt.env.update(
        {"SKYLESS_STORAGE_SYNC_SECONDS": "600", "SKYLESS_LOG_FLUSH_SECONDS": "0.5", "COLUMNS": "220"}
    )
    rt.up()
    yield rt
    rt.cli("local", "down")


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


def _s3(runtime: Runtime) -> Any:
    import json

    endpoint = json.loads((runtime.home / "local" / "runtime.json").read_text())["aws_endpoint_url"]
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="skyless-local", aws_secret_access_key="skyless-local")  # fmt: skip


def test_a_budget_reached_mid_job_notifies_stops_it_at_a_checkpoint_and_refuses_the_next_launch(
    runtime: Runtime, webhook: SlackWebhook, tmp_path: Path
) -> None:
    answer = runtime.api.put("/notifications", json={"slack_webhook": webhook.url})
    assert answer.status_code == 200, answer.text
    bucket = f"budget-ckpt-{uuid.uuid4().hex[:8]}"
    task = tmp_path / "train.yaml"
    task.write_text(TASK.format(bucket=bucket))
    launched = runtime.cli("launch", str(task), "--detach")
    assert launched.returncode == 0, launched.stdout + launched.stderr
    job_id = re.search(r"Job (job-\w+) submitted", launched.stdout).group(1)  # type: ignore[union-attr]

    job = runtime.wait(job_id, lambda j: j["state"] == "RUNNING" and "step 5" in runtime.logs(job_id, 0))
    monthly = round(job["cost"] * 2.5, 8)  # the job has spent 40 % of it: reached in about as long again
    budget = runtime.cli("budget", "set", "--monthly", str(monthly))
    assert budget.returncode == 0, budget.stdout + budget.stderr

    # the reconcile sweep runs once a minute: the job is stopped within about two of them
    final = runtime.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=200)
    assert final["state"] == "CANCELLED", final
    assert re.match(r"monthly budget of \d{4}-\d\d reached: spent \$\d", final["reason"]), final["reason"]
    assert final["recoveries"] == 0 and final["attempt"] == 0  # stopped, not recovered elsewhere

    notices = [e for e in final["timeline"] if e["kind"] == "budget"]
    assert [e["detail"]["percent"] for e in notices] == [50, 80, 100], notices
    preempting = [e for e in final["timeline"] if e["state"] == "CANCELLED"]
    assert preempting and preempting[0]["message"].startswith("stopped: monthly budget")

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len([p for p in webhook.posts if "budget" in p["text"]]) < 3:
        time.sleep(0.5)
    budget_posts = [p for p in webhook.posts if "budget" in p["text"]]
    assert len(budget_posts) == 3, webhook.posts  # once each
    assert all(p["text"] == "skyless: budgeted-train reached a budget threshold" for p in budget_posts)

    text = runtime.logs(job_id, 0)
    last_step = max(int(s) for s in re.findall(r"step (\d+)", text))
    saved = int(_s3(runtime).get_object(Bucket=bucket, Key="step")["Body"].read())
    assert saved >= last_step - 1 and saved > 5, (saved, last_step)  # the notice's write-back, not a sync

    refused = runtime.cli("launch", str(task), "--detach")
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0 and "Traceback" not in said
    assert re.search(r"monthly budget of \d{4}-\d\d reached: spent \$[\d.]+ \(ended jobs \$[\d.]+ \+ running "
                     r"\$[\d.]+\) of \$[\d.]+", said), said  # fmt: skip
    shown = runtime.cli("budget", "show")
    assert shown.returncode == 0 and "monthly budget" in shown.stdout, shown.stdout
