"""A deadline job's launches in the provider report: the policy's walk (shared/jobs/deadline_launch.py) and
make before break (shared/jobs/make_before_break.py) driven through the real provision handler against the
local cloud, then `skyless report providers` as a user types it. Every refusal is counted by hand where the
cloud refuses it (the local cloud's capacity check), never from what skyless wrote."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from conftest import QueueDriver
from typer.testing import CliRunner, Result

from cli.main import app as cli
from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.base import LaunchSpec
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = "name: train\nresources:\n  cloud: aws\n  region: us-east-1\n  cpus: 2+\n  use_spot: true\nrun: echo\n"
ZONES = ["aws/us-east-1/us-east-1a", "aws/us-east-1/us-east-1b", "aws/us-east-1/us-east-1c"]


@pytest.fixture
def refused(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Launches the local cloud refused, per job: counted where the cloud raises, as a provider would."""
    counts: Counter[str] = Counter()
    check = LocalCloud._check_capacity

    def counted(cloud: LocalCloud, spec: LaunchSpec) -> None:
        try:
            check(cloud, spec)
        except Exception:
            counts[spec.cluster_id.rsplit("-", 1)[0]] += 1
            raise

    monkeypatch.setattr(LocalCloud, "_check_capacity", counted)
    return counts


@pytest.fixture
def fast(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    monkeypatch.setenv("SKYLESS_SPOT_REFUSALS_PER_HOUR", "0")  # no hourly limit: every check probes spot
    settings = stack.with_(restart_overhead_seconds=4, deadline_reaction_seconds=2, deadline_retry_seconds=3)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return settings


def _deliver(handler: Any, queues: QueueDriver, records: list[dict[str, Any]]) -> None:
    assert handler(queues.event(records), None) == {"batchItemFailures": []}


def _submit(settings: Settings, queues: QueueDriver, owner: str, *, deadline: str, hours: float) -> str:
    job = SubmitJob.from_text(owner=owner, task_text=TASK, deadline=deadline, hours=hours)
    job_id = submit_job(wiring_for(settings), job).job_id
    _deliver(optimize_handler, queues, queues.receive("optimize"))
    _deliver(provision_handler, queues, queues.receive("provision"))
    return job_id


def _check(settings: Settings, queues: QueueDriver, job_id: str) -> None:
    """The job's pending deadline check, delivered when due (as SQS delivers the delayed message)."""
    job = wiring_for(settings).store.get(job_id)
    assert job is not None and job.next_check_at is not None
    body = {"job_id": job_id, "attempt": int(job.attempt), "action": "deadline_check"}
    body["not_before"] = float(job.next_check_at)
    time.sleep(max(0.0, float(job.next_check_at) - time.time()))
    _deliver(provision_handler, queues, [{"messageId": f"m-{time.time()}", "body": json.dumps(body)}])


def _cluster(settings: Settings, job_id: str) -> Any:
    store = wiring_for(settings).store
    job = store.get(job_id)
    assert job is not None
    cluster = store.cluster(job.cluster_id)
    assert cluster is not None
    return cluster


def _report(api_url: str, key: str, *more: str) -> dict[str, Any]:
    answer: Result = CliRunner().invoke(
        cli, ["report", "providers", "--json", *more, "--api-url", api_url, "--api-key", key]
    )
    assert answer.exit_code == 0, answer.output
    return dict(json.loads(answer.output))


def _line(card: dict[str, Any]) -> dict[str, Any]:
    (line,) = [x for x in card["lines"] if (x["cloud"], x["region"]) == ("aws", "us-east-1")]
    return dict(line)


def test_a_deadline_jobs_refused_and_obtained_launches_are_each_counted_once_for_their_owner(
    fast: Settings, queues: QueueDriver, cli_api: list[str], refused: Counter[str]
) -> None:
    api_url = cli_api[1]
    keys = {name: create_user(name, fast) for name in ("a", "b")}
    users = {name: find_user(key, fast).user_id for name, key in keys.items()}  # type: ignore[union-attr]
    cloud = LocalCloud(fast.home)

    # a: the policy's walk is refused spot in two zones, then launches spot in the third
    cloud.set_capacity_rules({"no_spot_capacity": ZONES[:2]})
    a = _submit(fast, queues, users["a"], deadline="2h", hours=1.0)
    assert _cluster(fast, a).zone == "us-east-1c" and _cluster(fast, a).use_spot

    # b: no spot anywhere and little slack: on-demand; two checks try spot beside it (make before break)
    # and are refused; then spot is back and the third check obtains it, letting on-demand go
    cloud.set_capacity_rules({"no_spot_capacity": ["*"]})
    b = _submit(fast, queues, users["b"], deadline="600s", hours=500 / 3600)
    assert not _cluster(fast, b).use_spot
    walk_refusals = refused[b]
    for _ in range(2):
        _check(fast, queues, b)
    assert refused[b] == walk_refusals + 2  # each check asked once
    cloud.set_capacity_rules({})
    _check(fast, queues, b)
    moved = wiring_for(fast).store.get(b)
    assert moved is not None and moved.state == JobState.SETTING_UP.value and int(moved.attempt) == 1
    assert _cluster(fast, b).use_spot
    assert refused[a] == 2 and refused[b] >= 3
    for job_id in (a, b):  # noted beside the timeline: `status` shows the launches, not every refusal
        timeline = get_job(wiring_for(fast), job_id, owner=None).timeline
        assert [e for e in timeline if e["kind"] == "refused"] == []

    mine = {name: _line(_report(api_url, key)) for name, key in keys.items()}
    # a: two refused for capacity, one launched; b: its refusals, and two launches (on-demand, then spot)
    assert (mine["a"]["launch_requests"], mine["a"]["launches"], mine["a"]["capacity_refusals"]) == (3, 1, 2)
    assert mine["b"]["launches"] == 2 and mine["b"]["capacity_refusals"] == refused[b]
    assert mine["b"]["launch_requests"] == refused[b] + 2  # the obtained spot launch: its cluster, once
    assert mine["a"]["other_refusals"] == mine["b"]["other_refusals"] == 0

    admin = create_user("lead", fast, admin=True)
    across = _report(api_url, admin, "--all-users")
    assert across["jobs_read"] == 2
    assert _line(across)["launch_requests"] == refused[a] + refused[b] + 3
    assert _line(across)["capacity_refusals"] == refused[a] + refused[b]
    not_admin = httpx.get(
        f"{api_url}/reports/providers",
        params={"all_users": "true"},
        headers={"Authorization": f"Bearer {keys['a']}"},
    )
    assert not_admin.status_code == 403
