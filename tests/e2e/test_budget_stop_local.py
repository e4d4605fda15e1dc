"""The proof of issue 23's budgets, as a user runs it on the local runtime: a job checkpoints every second to
a MOUNT_CACHED bucket; its owner's monthly budget (set with `skyless budget set`), or the team's (set by the
admin with `skyless budget set --team`), is reached mid-job; the periodic reconcile sends the 50/80/100 %
notices to the user's Slack once each, and stops the job through the preemption-notice path (the agent
writes the last checkpoint back); the next `skyless launch` (the owner's, or a teammate's) is refused with
the arithmetic. The bucket's periodic write-back is set far apart (10 min), so a checkpoint in the bucket
that matches the last step the task printed was written back at the notice."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from fakes.slack_webhook import SlackWebhook
from test_end_to_end_local import SKYLESS, TERMINAL, Runtime

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
    endpoint = json.loads((runtime.home / "local" / "runtime.json").read_text())["aws_endpoint_url"]
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="skyless-local", aws_secret_access_key="skyless-local")  # fmt: skip


def _as(runtime: Runtime, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as another user of the same deployment types it: their key, the deployment's URL."""
    url = json.loads((runtime.home / "local" / "runtime.json").read_text())["api_url"]
    return subprocess.run([str(SKYLESS), *args, "--api-url", url, "--api-key", key], env=runtime.env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def _new_user(runtime: Runtime, name: str) -> tuple[str, str]:
    made = runtime.api.post("/admin/users", json={"name": name})
    assert made.status_code in (200, 201), made.text
    return made.json()["user_id"], made.json()["api_key"]


def _reached_mid_job(
    runtime: Runtime, webhook: SlackWebhook, job_id: str, reason: str, budget: Any, subject: str | None = None
) -> dict[str, Any]:
    """Wait until the job has checkpointed a few steps, set its budget (`budget(cost so far)`), and wait for
    the sweep to stop it; check the notices, the Slack posts and the checkpoint written back at the notice."""
    job = runtime.wait(job_id, lambda j: j["state"] == "RUNNING" and "step 5" in runtime.logs(job_id, 0))
    set_budget = budget(job["cost"])
    assert set_budget.returncode == 0, set_budget.stdout + set_budget.stderr

    # the reconcile sweep runs once a minute: the job is stopped within about two of them
    final = runtime.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=200)
    assert final["state"] == "CANCELLED", final
    assert re.match(reason + r" reached: spent \$\d", final["reason"]), final["reason"]
    assert final["recoveries"] == 0 and final["attempt"] == 0  # stopped, not recovered elsewhere

    notices = [e for e in final["timeline"] if e["kind"] == "budget"]
    assert [e["detail"]["percent"] for e in notices] == [50, 80, 100], notices
    preempting = [e for e in final["timeline"] if e["state"] == "CANCELLED"]
    assert preempting and re.match("stopped: " + reason, preempting[0]["message"]), preempting

    said = subject or "skyless: budgeted-train reached a budget threshold"
    expected = sorted(said.format(p) for p in (50, 80, 100))
    assert _budget_posts(webhook) == expected  # once each
    return final


def _budget_posts(webhook: SlackWebhook, count: int = 3) -> list[str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len([p for p in webhook.posts if "budget" in p["text"]]) < count:
        time.sleep(0.5)
    return sorted(str(p["text"]) for p in webhook.posts if "budget" in p["text"])


def _checkpoint_written_back(runtime: Runtime, job_id: str, bucket: str) -> None:
    text = runtime.logs(job_id, 0)
    last_step = max(int(s) for s in re.findall(r"step (\d+)", text))
    saved = int(_s3(runtime).get_object(Bucket=bucket, Key="step")["Body"].read())
    assert saved >= last_step - 1 and saved > 5, (saved, last_step)  # the notice's write-back, not a sync


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

    def budget(cost: float) -> subprocess.CompletedProcess[str]:  # 40 % spent: reached in as long again
        return runtime.cli("budget", "set", "--monthly", str(round(cost * 2.5, 8)))

    _reached_mid_job(runtime, webhook, job_id, r"monthly budget of \d{4}-\d\d", budget)
    _checkpoint_written_back(runtime, job_id, bucket)

    refused = runtime.cli("launch", str(task), "--detach")
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0 and "Traceback" not in said
    assert re.search(r"monthly budget of \d{4}-\d\d reached: spent \$[\d.]+ \(ended attempts \$[\d.]+ \+ "
                     r"running \$[\d.]+\) of \$[\d.]+", said), said  # fmt: skip
    shown = runtime.cli("budget", "show")
    assert shown.returncode == 0 and "monthly budget" in shown.stdout, shown.stdout


def test_a_team_budget_reached_mid_job_stops_it_at_a_checkpoint_and_refuses_a_teammates_launch(
    runtime: Runtime, webhook: SlackWebhook, tmp_path: Path
) -> None:
    (ana, ana_key), (ben, ben_key) = _new_user(runtime, "ana"), _new_user(runtime, "ben")
    team = f"ml-{uuid.uuid4().hex[:6]}"
    for step in (("create", team), ("add", team, ana), ("add", team, ben)):
        made = runtime.cli("admin", "teams", *step)  # the machine's owner holds the admin key
        assert made.returncode == 0, made.stdout + made.stderr
    as_ana = copy.copy(runtime)  # ana's view of the same runtime: her jobs are hers alone
    as_ana.api = httpx.Client(base_url=runtime.api.base_url, timeout=30,
                              headers={"Authorization": f"Bearer {ana_key}"})  # fmt: skip
    answer = as_ana.api.put("/notifications", json={"slack_webhook": webhook.url})
    assert answer.status_code == 200, answer.text
    bucket = f"team-ckpt-{uuid.uuid4().hex[:8]}"
    task = tmp_path / "train.yaml"
    task.write_text(TASK.format(bucket=bucket))
    launched = _as(runtime, ana_key, "launch", str(task), "--detach")
    assert launched.returncode == 0, launched.stdout + launched.stderr
    job_id = re.search(r"Job (job-\w+) submitted", launched.stdout).group(1)  # type: ignore[union-attr]

    def team_budget(cost: float) -> subprocess.CompletedProcess[str]:
        return runtime.cli("budget", "set", "--team", team, "--monthly", str(round(cost * 2.5, 8)))

    bens_hook, teams_hook = SlackWebhook().start(), SlackWebhook().start()
    try:  # ben has no job running, and the team has its own channel: both are told too
        as_ben = {"Authorization": f"Bearer {ben_key}"}
        url = f"{runtime.api.base_url}/notifications"
        bens_answer = httpx.put(url, json={"slack_webhook": bens_hook.url}, headers=as_ben, timeout=30)
        assert bens_answer.status_code == 200, bens_answer.text
        channel = runtime.cli("team", "notify", team, "--slack", teams_hook.url)
        assert channel.returncode == 0, channel.stdout + channel.stderr
        reason = f"monthly budget of team {team} for \\d{{4}}-\\d\\d"
        subject = f"skyless: team {team} reached {{}} % of its monthly budget"
        _reached_mid_job(as_ana, webhook, job_id, reason, team_budget, subject)
        told = sorted(subject.format(p) for p in (50, 80, 100))
        assert _budget_posts(bens_hook) == told and _budget_posts(teams_hook) == told
    finally:
        bens_hook.stop()
        teams_hook.stop()
    _checkpoint_written_back(as_ana, job_id, bucket)

    bens = tmp_path / "bens.yaml"  # his own checkpoint bucket: ana's is hers
    bens.write_text(TASK.format(bucket=f"team-ckpt-{uuid.uuid4().hex[:8]}"))
    refused = _as(runtime, ben_key, "launch", str(bens), "--detach")
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0 and "Traceback" not in said
    assert re.search(rf"monthly budget of team {team} for \d{{4}}-\d\d reached: spent \$[\d.]+ \(ended "
                     r"attempts \$[\d.]+ \+ running \$[\d.]+\) of \$[\d.]+", said), said  # fmt: skip
    shown = _as(runtime, ben_key, "budget", "show", "--team", team)
    assert shown.returncode == 0 and f"team {team}" in shown.stdout, shown.stdout + shown.stderr
