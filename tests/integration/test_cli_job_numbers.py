"""SkyPilot's integer managed-job ids typed at `skyless` (typer's CliRunner against the API over real HTTP on
moto) and passed to the SDK: each user's jobs are numbered 1, 2, ...; `jobs launch` prints `Managed Job ID: N`
as sky does, `jobs queue` shows it, and `jobs cancel N...`, `jobs logs N`, `status N`, `logs N` and `cancel N`
take it. Two users each have a job 1; neither reaches the other's by any number."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner, Result

import skyless
from cli.main import app as cli
from shared.config import Settings
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "220"}


@dataclass(frozen=True)
class Users:
    alice: list[str]  # the CLI flags that point at the API as each user
    bob: list[str]


@pytest.fixture
def users(stack: Settings, cli_api: list[str]) -> Users:
    from shared.store.users import create_user

    return Users(cli_api, [*cli_api[:2], "--api-key", create_user("bob", stack)])


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def launched(flags: list[str], name: str) -> tuple[str, int]:
    """`skyless jobs launch -y -d` as a sky script types it: the job id and the number it printed."""
    result = run("jobs", "launch", "-y", "-d", "-n", name, "sleep 100", *flags)
    assert result.exit_code == 0, result.output
    number = re.search(r"^Managed Job ID: (\d+)$", result.output, re.MULTILINE)
    assert number is not None, result.output
    assert f"Follow it with: skyless jobs logs {number.group(1)}" in result.output
    return result.output.split("Job ", 1)[1].split()[0], int(number.group(1))


def state_of(stack: Settings, job_id: str) -> str:
    job = wiring_for(stack).store.get(job_id)
    assert job is not None
    return str(job.state)


def test_each_users_jobs_are_numbered_from_1_and_jobs_queue_shows_the_number(
    stack: Settings, users: Users
) -> None:
    alice_1, alice_2 = launched(users.alice, "a-one"), launched(users.alice, "a-two")
    bob_1 = launched(users.bob, "b-one")

    assert (alice_1[1], alice_2[1], bob_1[1]) == (1, 2, 1)
    queue = run("jobs", "queue", *users.alice)
    assert queue.exit_code == 0, queue.output
    rows = {
        m.group(2): int(m.group(1)) for m in re.finditer(r"│\s*(\d+)\s*│\s*(job-[0-9a-f]+)", queue.output)
    }
    assert rows == {alice_1[0]: 1, alice_2[0]: 2}  # the ID column, beside the job-… id; not bob's job
    status = run("status", "2", *users.alice)
    assert status.exit_code == 0 and f"{alice_2[0]} (ID 2) a-two" in status.output


def test_cancel_and_logs_by_number_reach_only_the_callers_own_job(stack: Settings, users: Users) -> None:
    (alice_1, _), (alice_2, _) = launched(users.alice, "a-one"), launched(users.alice, "a-two")
    bob_1, _ = launched(users.bob, "b-one")
    wiring_for(stack).objects.put_text(f"runs/{alice_1}/logs/0/000-000001", "alice's secret line\n")

    for verb in (["jobs", "cancel", "-y", "2"], ["jobs", "logs", "--no-follow", "2"], ["status", "2"],
                 ["logs", "--no-follow", "2"], ["cancel", "2"]):  # fmt: skip
        theirs, nobodys = run(*verb, *users.bob), run(*[w.replace("2", "9") for w in verb], *users.bob)
        assert theirs.exit_code == nobodys.exit_code == 2, (verb, theirs.output)
        assert "no job 2" in theirs.output and "Traceback" not in theirs.output
        assert theirs.output.replace("2", "9") == nobodys.output  # alice's 2 is as unknown to bob as 9
    bobs_logs = run("jobs", "logs", "--no-follow", "1", *users.bob)
    assert "alice's secret line" not in bobs_logs.output

    assert "alice's secret line" in run("jobs", "logs", "--no-follow", "1", *users.alice).output
    assert "alice's secret line" in run("logs", "--no-follow", "1", *users.alice).output
    cancelled = run("jobs", "cancel", "-y", "1", *users.bob)
    assert cancelled.exit_code == 0 and f"Job {bob_1}: CANCELLED" in cancelled.output
    assert state_of(stack, alice_1) == state_of(stack, alice_2) == "PLANNED"  # bob's 1 is bob's own

    both = run("jobs", "cancel", "-y", "1", "2", *users.alice)
    assert both.exit_code == 0, both.output
    assert state_of(stack, alice_1) == state_of(stack, alice_2) == "CANCELLED"


def test_the_sdk_takes_skypilots_integer_ids_and_lists_them(stack: Settings, users: Users) -> None:
    skyless.api_login(users.alice[1], users.alice[3])
    try:
        first, _ = skyless.jobs.launch(skyless.Task(name="sdk-one", run="sleep 100"))
        second, _ = skyless.jobs.launch(skyless.Task(name="sdk-two", run="sleep 100"))
        assert [(j.job_id, j.job_number) for j in skyless.jobs.queue()] == [(second, 2), (first, 1)]
        skyless.api_login(users.bob[1], users.bob[3])
        with pytest.raises(skyless.UserError, match="no job 2"):
            skyless.jobs.cancel(job_ids=[2])
        skyless.api_login(users.alice[1], users.alice[3])
        assert skyless.jobs.cancel(job_ids=[2]) == [second]  # as `sky.jobs.cancel(job_ids=[2])`
    finally:
        skyless.api_login(None, None)
    assert state_of(stack, second) == "CANCELLED" and state_of(stack, first) == "PLANNED"
