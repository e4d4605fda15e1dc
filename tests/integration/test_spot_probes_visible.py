"""Bounded spot probes through the real handlers: a deadline job does not probe a zone another user's job was
just refused spot in, a job's refused launches stop at its hourly limit, and `skyless status` (typer's
CliRunner against the API over HTTP) and the dashboard's job page (the Chalice app) say so."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import pytest
from chalice.test import Client
from test_dashboard_pages import Browser, text, user_id
from test_deadline_jobs import SLEEPER, TASK, deliver
from typer.testing import CliRunner

from cli.main import app as cli
from functions.submit.app import app
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def refused_by(settings: Settings, job_id: str) -> Counter[str]:
    """Each zone's spot launches refused for `job_id`, from the shared record every job writes."""
    _, refusals = wiring_for(settings).cooldowns.evidence()
    return Counter(place for place, listed in refusals.items() for _, who in listed if who.startswith(job_id))


def submit(settings: Settings, queues: object, owner: str) -> str:
    command = SubmitJob.from_text(owner=owner, task_text=TASK, deadline="10h", hours=1.0)
    job_id = submit_job(wiring_for(settings), command).job_id
    deliver(queues, "optimize")  # type: ignore[arg-type]
    deliver(queues, "provision")  # type: ignore[arg-type]
    return job_id


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def test_a_second_users_job_does_not_probe_zones_the_first_was_just_refused_in_and_status_says_so(
    stack: Settings, queues: object, cli_api: list[str]
) -> None:
    LocalCloud(stack.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    first = submit(stack, queues, "alice")
    tried = refused_by(stack, first)
    assert tried and get_job(wiring_for(stack), first, owner=None).state == JobState.WAITING
    assert max(tried.values()) == 1  # one probe per zone: a refused zone waits, the walk turns elsewhere

    key = cli_api[cli_api.index("--api-key") + 1]
    found = find_user(key, stack)
    assert found is not None
    second = submit(stack, queues, found.user_id)
    assert not set(refused_by(stack, second)) & set(tried)  # none of the zones alice's job just found dry
    assert get_job(wiring_for(stack), second, owner=None).state == JobState.WAITING

    status = CliRunner().invoke(cli, ["status", second, *cli_api], env={"COLUMNS": "250"})
    assert status.exit_code == 0, status.output
    zone = sorted(tried)[0]
    said = re.search(
        rf"spot in {re.escape(zone)}: 1 refusal\(s\) in the last 10 min; next probe in (\d) min",
        status.output,
    )
    assert said and 3 <= int(said.group(1)) <= 5, status.output  # the zone's wait: the retry, 300 s
    other = CliRunner().invoke(cli, ["status", first, *cli_api], env={"COLUMNS": "250"})
    assert other.exit_code != 0 and "spot in" not in other.output  # alice's job is not the CLI user's


def test_a_jobs_refused_launches_stop_at_its_hourly_limit_and_the_job_page_says_so(
    stack: Settings, queues: object, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = stack.with_(spot_refusals_per_hour=2)
    for name, value in stack.to_env().items():
        monkeypatch.setenv(name, value)
    LocalCloud(stack.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    key = create_user("alice", stack)
    job_id = submit(stack, queues, user_id(stack, key))
    assert sum(refused_by(stack, job_id).values()) == 2
    job = get_job(wiring_for(stack), job_id, owner=None)
    assert job.state == JobState.WAITING  # no spot to be had as far as the policy may know: it waits
    assert any("the limit of 2/h" in line for line in job.spot_probes)

    browser = Browser(client)
    browser.sign_in(key)
    page = text(browser.get(f"/dashboard/jobs/{job_id}"))
    assert 'id="spot-probes"' in page
    assert re.search(
        r"2 refused launch\(es\) in the last hour, the limit of 2/h; next probe in (59|60) min", page
    )
    bob = Browser(client)
    bob.sign_in(create_user("bob", stack))
    assert bob.get(f"/dashboard/jobs/{job_id}").status_code == 404


def test_a_jobs_view_reads_the_shared_spot_evidence_once(
    stack: Settings, queues: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    LocalCloud(stack.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(stack, queues, "alice")
    wiring = wiring_for(stack)
    record = type(wiring.cooldowns)
    read = record.evidence
    reads: list[float | None] = []

    def counted(self: object, now: float | None = None) -> object:
        reads.append(now)
        return read(self, now)  # type: ignore[arg-type]

    monkeypatch.setattr(record, "evidence", counted)
    job = get_job(wiring, job_id, owner=None)
    assert job.spot_probes and job.cooling  # both come from the record: the refusals cool the zones
    assert len(reads) == 1
