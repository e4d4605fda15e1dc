"""Plain spot jobs (no deadline) launch and recover on the shared evidence of spot capacity, through the
handlers AWS calls (optimize and provision on SQS records, spot_watch with the EC2 spot warning) against
moto's server and the local cloud: a second user's job does not probe a zone the first user's job was just
refused spot in, and waits (never fails) until a zone may be probed again; a job's refused spot launches stop
at its hourly limit; a job preempted more often than any limit finishes, without probing again a zone that
refused it."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

import pytest
from conftest import QueueDriver
from test_recovery_without_limit import spot_warning
from typer.testing import CliRunner

from cli.main import app as cli
from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.store.users import find_user
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: train
resources:
  cloud: aws
  region: us-east-1
  cpus: 2+
  use_spot: true
run: python train.py
"""
PREEMPTIONS = 22


@pytest.fixture
def settings(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Nodes that sleep (the test reports for them); a first launch gives up after 1 counted round."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    changed = stack.with_(max_wait_retries=1)
    for name, value in changed.to_env().items():
        monkeypatch.setenv(name, value)
    return changed


def deliver(queues: QueueDriver, kind: str, records: list[dict[str, Any]] | None = None) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    batch = queues.receive(kind) if records is None else records
    assert handler(queues.event(batch), None) == {"batchItemFailures": []}


def wake(queues: QueueDriver, job_id: str, attempt: int = 0, not_before: float | None = None) -> None:
    """The waiting job's delayed launch message, delivered now (as the reconcile sweep re-sends it)."""
    body: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "action": "launch"}
    if not_before is not None:
        body["not_before"] = not_before
    deliver(queues, "provision", [{"messageId": f"wake-{job_id}-{time.time()}", "body": json.dumps(body)}])


def refused_by(settings: Settings, job_id: str) -> Counter[str]:
    """Each zone's spot launches refused for `job_id`, from the shared record every job writes."""
    _, refusals = wiring_for(settings).cooldowns.evidence()
    return Counter(place for place, listed in refusals.items() for _, who in listed if who.startswith(job_id))


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def submit(settings: Settings, queues: QueueDriver, owner: str) -> str:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner=owner, task_text=TASK)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return job_id


def test_a_second_users_plain_spot_job_does_not_probe_zones_the_first_was_refused_in_and_waits(
    settings: Settings, queues: QueueDriver, cli_api: list[str]
) -> None:
    LocalCloud(settings.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    first = submit(settings, queues, "alice")
    tried = refused_by(settings, first)
    assert len(tried) >= 3 and max(tried.values()) == 1  # each zone of us-east-1 once: a refused zone waits
    assert view(settings, first).state == JobState.WAITING

    found = find_user(cli_api[cli_api.index("--api-key") + 1], settings)
    assert found is not None
    second = submit(settings, queues, found.user_id)
    assert refused_by(settings, second) == Counter()  # not one probe of the zones alice's job found dry
    waiting = wiring_for(settings).store.get(second)
    assert waiting is not None and waiting.state == JobState.WAITING
    assert 250 <= float(waiting.next_check_at) - time.time() <= 300  # until the zones' wait (300 s) is over

    for _ in range(3):  # woken early, again and again: held back each time, never failed
        wake(queues, second)
    job = wiring_for(settings).store.get(second)
    assert job is not None and job.state == JobState.WAITING and int(job.wait_rounds) == 0
    assert refused_by(settings, second) == Counter()
    said = [event.message for event in wiring_for(settings).store.timeline(second)]
    assert any(m.startswith("every spot place of the plan waits on refused launches") for m in said), said

    status = CliRunner().invoke(cli, ["status", second, *cli_api], env={"COLUMNS": "250"})
    assert status.exit_code == 0, status.output
    assert f"spot in {sorted(tried)[0]}: 1 refusal(s) in the last 10 min; next probe in" in status.output


def test_a_plain_spot_jobs_refused_launches_stop_at_its_hourly_limit_and_it_waits(
    settings: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    limited = settings.with_(spot_refusals_per_hour=2)
    for name, value in limited.to_env().items():
        monkeypatch.setenv(name, value)
    LocalCloud(limited.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(limited, queues, "alice")
    assert sum(refused_by(limited, job_id).values()) == 2  # of 5 zones: the others are not asked
    job = wiring_for(limited).store.get(job_id)
    assert job is not None and job.state == JobState.WAITING
    assert 3500 <= float(job.next_check_at) - time.time() <= 3600  # until the oldest refusal is an hour old
    assert any("the limit of 2/h" in line for line in view(limited, job_id).spot_probes)


def test_a_copy_of_an_earlier_waits_launch_message_is_dropped(
    settings: Settings, queues: QueueDriver
) -> None:
    LocalCloud(settings.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(settings, queues, "alice")
    before = wiring_for(settings).store.get(job_id)
    assert before is not None and before.state == JobState.WAITING
    wake(queues, job_id, not_before=time.time() - 5)  # a copy due already, of a wait that is not the job's
    after = wiring_for(settings).store.get(job_id)
    assert after is not None and after.version == before.version  # dropped: no walk, no new wait


def test_a_plain_spot_job_preempted_22_times_recovers_around_zones_another_job_found_dry_and_finishes(
    settings: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = settings.with_(deadline_retry_seconds=1800)  # a zone refused once waits 30 min: the whole test
    for name, value in slow.to_env().items():
        monkeypatch.setenv(name, value)
    bob = submit(slow, queues, "bob")
    running = view(slow, bob).cluster
    assert running is not None
    home = f"aws/us-east-1/{running['zone']}"
    zones = [f"aws/us-east-1/{z}" for z in wiring_for(slow).catalog.zones("aws", "us-east-1")]
    dry = [z for z in zones if z != home]
    LocalCloud(slow.home).set_capacity_rules({"no_spot_capacity": dry})
    for zone in dry:  # alice's jobs, one per zone, refused spot: the evidence bob's recoveries read
        pinned = TASK.replace("  cpus:", f"  zone: {zone.rsplit('/', 1)[1]}\n  cpus:")
        alice = submit_job(wiring_for(slow), SubmitJob.from_text(owner="alice", task_text=pinned)).job_id
        deliver(queues, "optimize")
        deliver(queues, "provision")
        assert refused_by(slow, alice) == Counter({zone: 1})
    for round_ in range(PREEMPTIONS):
        before = view(slow, bob)
        assert before.state == JobState.SETTING_UP, before.reason
        node = before.cluster["nodes"][0]  # type: ignore[index]
        report_agent_status(wiring_for(slow), AgentReport(bob, node["instance_id"], "running"))
        LocalCloud(slow.home).preempt(bob, notice_seconds=0.05)
        assert spot_watch_handler(spot_warning(node["instance_id"]), None) == {"outcome": "done"}
        deliver(queues, "provision")  # the teardown
        deliver(queues, "optimize")
        deliver(queues, "provision")
        after = view(slow, bob)
        assert after.attempt == before.attempt + 1 and after.recoveries == round_ + 1
    assert refused_by(slow, bob) == Counter()  # the zones alice's job found dry: not probed once in 22
    done = view(slow, bob)
    assert done.state == JobState.SETTING_UP and f"aws/us-east-1/{done.cluster['zone']}" == home  # type: ignore[index]
    for node in done.cluster["nodes"]:  # type: ignore[index]
        for phase in ("running", "succeeded"):
            report_agent_status(wiring_for(slow), AgentReport(bob, node["instance_id"], phase))
    assert view(slow, bob).state == JobState.SUCCEEDED
    deliver(queues, "provision")  # the last cluster's teardown


def test_a_plain_spot_job_with_no_spot_anywhere_keeps_waiting_past_a_first_launchs_rounds(
    settings: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a zone refused once waits 1 s, twice 2 s, ...; no hourly cap (it would hold the job an hour)
    quick = settings.with_(deadline_retry_seconds=1, spot_refusals_per_hour=0)
    for name, value in quick.to_env().items():
        monkeypatch.setenv(name, value)
    LocalCloud(quick.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(quick, queues, "alice")
    store = wiring_for(quick).store
    for _ in range(3):  # each past SKYLESS_MAX_WAIT_RETRIES=1: SkyPilot's managed jobs retry without limit
        job = store.get(job_id)
        assert job is not None and job.state == JobState.WAITING, job and job.reason
        assert float(job.next_check_at) - time.time() < 20  # the zones' wait, not a backoff of its own
        time.sleep(max(0.0, float(job.next_check_at) - time.time()) + 0.2)
        wake(queues, job_id, not_before=float(job.next_check_at))  # its own launch message, when due
    refused = refused_by(quick, job_id)
    assert len(refused) >= 3 and min(refused.values()) == 4  # every zone probed again in each round
    job = store.get(job_id)
    assert job is not None and job.state == JobState.WAITING and job.reason is None
