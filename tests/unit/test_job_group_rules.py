"""A job group's decisions, pure: when the auxiliary tasks stop, how the group ends, and the variables
through which its tasks find each other (SkyPilot's sky/jobs/controller.py `_run_job_group` semantics)."""

from __future__ import annotations

import pytest

from shared.jobs.job_groups import Member, decide, duration_seconds, primary_indices, termination_delays
from shared.jobs.node_env import job_group_env
from shared.states import JobState
from shared.task.loader import load_pipeline

S = JobState
GROUP = """\
name: rl
execution: parallel
primary_tasks: [trainer]
termination_delay: {default: 30s, replay-buffer: 2m}
---
name: trainer
---
name: replay-buffer
---
name: env-worker
"""


def members(*states: JobState, reasons: dict[int, str] | None = None) -> list[Member]:
    names = ["trainer", "replay-buffer", "env-worker"]
    return [Member(names[i], s, (reasons or {}).get(i)) for i, s in enumerate(states)]


@pytest.mark.parametrize(("text", "seconds"), [(30, 30), ("30", 30), ("30s", 30), ("5m", 300), ("1h", 3600)])
def test_durations_read_as_skypilot_writes_them(text: int | str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


def test_delays_per_task_with_a_default_and_primaries_from_the_header() -> None:
    pipeline = load_pipeline(GROUP, filename="rl.yaml")
    assert termination_delays(pipeline) == [30, 120, 30]
    assert primary_indices(pipeline) == frozenset({0})


def test_without_primary_tasks_every_task_is_primary_and_no_delay() -> None:
    pipeline = load_pipeline("name: g\nexecution: parallel\n---\nname: a\n---\nname: b\n", filename="g.yaml")
    assert primary_indices(pipeline) == frozenset({0, 1})
    assert termination_delays(pipeline) == [0, 0]


def test_nothing_stops_while_a_primary_task_runs() -> None:
    verdict = decide(members(S.RUNNING, S.RUNNING, S.RUNNING), frozenset({0}), [30, 120, 30], None, 100.0)
    assert verdict.all_running and not verdict.primaries_done
    assert (verdict.stop_now, verdict.wake_in, verdict.final) == ([], None, None)


def test_primaries_succeeded_auxiliaries_stop_after_their_own_delay() -> None:
    states = members(S.SUCCEEDED, S.RUNNING, S.RUNNING)
    first = decide(states, frozenset({0}), [30, 120, 30], None, 100.0)
    assert first.primaries_done and first.stop_now == [] and first.wake_in == 30 and first.final is None
    at_30 = decide(states, frozenset({0}), [30, 120, 30], 100.0, 130.0)
    assert at_30.stop_now == [2] and at_30.wake_in == 90
    at_120 = decide(members(S.SUCCEEDED, S.RUNNING, S.CANCELLED), frozenset({0}), [30, 120, 30], 100.0, 221.0)
    assert at_120.stop_now == [1] and at_120.wake_in is None
    assert at_120.final == S.SUCCEEDED  # the stop it asks for is the last


def test_a_failed_primary_stops_the_auxiliaries_at_once_and_fails_the_group() -> None:
    verdict = decide(members(S.FAILED, S.RUNNING, S.SETTING_UP), frozenset({0}), [30, 120, 30], None, 5.0)
    assert verdict.stop_now == [1, 2] and verdict.final == S.FAILED
    assert verdict.reason == "task trainer of the job group failed"


def test_auxiliaries_stopped_by_the_group_do_not_fail_it_but_one_that_failed_does() -> None:
    stopped = "stopped by the job group: its primary tasks ended (termination_delay 30 s)"
    done = members(S.SUCCEEDED, S.CANCELLED, S.CANCELLED, reasons={1: stopped, 2: stopped})
    assert decide(done, frozenset({0}), [0, 0, 0], 1.0, 2.0).final == S.SUCCEEDED
    failed = members(S.SUCCEEDED, S.FAILED, S.CANCELLED)
    verdict = decide(failed, frozenset({0}), [0, 0, 0], 1.0, 2.0)
    assert verdict.final == S.FAILED
    assert verdict.reason == "auxiliary task replay-buffer of the job group failed"


def test_all_primary_group_ends_when_every_task_has_ended_failed_if_one_failed() -> None:
    every = frozenset({0, 1, 2})
    assert decide(members(S.FAILED, S.RUNNING, S.RUNNING), every, [0, 0, 0], None, 1.0).final is None
    verdict = decide(members(S.FAILED, S.SUCCEEDED, S.SUCCEEDED), every, [0, 0, 0], None, 1.0)
    assert verdict.final == S.FAILED and verdict.stop_now == []
    succeeded = members(S.SUCCEEDED, S.SUCCEEDED, S.SUCCEEDED)
    assert decide(succeeded, every, [0, 0, 0], None, 1.0).final == S.SUCCEEDED


def test_a_cancelled_primary_cancels_the_group() -> None:
    verdict = decide(members(S.CANCELLED, S.RUNNING, S.RUNNING), frozenset({0}), [30, 30, 30], None, 1.0)
    assert verdict.stop_now == [1, 2] and verdict.final == S.CANCELLED


def test_decisions_repeat_exactly_for_a_duplicate_message() -> None:
    states = members(S.SUCCEEDED, S.RUNNING, S.RUNNING)
    assert decide(states, frozenset({0}), [30, 120, 30], 100.0, 130.0) == decide(
        states, frozenset({0}), [30, 120, 30], 100.0, 130.0
    )


def test_group_variables_name_every_task_head_and_every_node() -> None:
    env = job_group_env("rl", [("trainer", ["10.0.0.5", "10.0.0.6"]), ("replay-buffer", ["10.0.1.7"])])
    assert env["SKYPILOT_JOBGROUP_HOST_TRAINER"] == "10.0.0.5"
    assert env["SKYPILOT_JOBGROUP_HOST_REPLAY_BUFFER"] == "10.0.1.7"
    assert env["SKYLESS_JOBGROUP_HOSTS"].split("\n") == [
        "10.0.0.5 trainer-0.rl", "10.0.0.6 trainer-1.rl", "10.0.1.7 replay-buffer-0.rl",
    ]  # fmt: skip


def test_agent_adds_group_hosts_once_and_never_on_the_local_cloud(tmp_path) -> None:
    from node_agent.agent.node import add_job_group_hosts

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    config = {"cloud": "aws", "run_env": {"SKYLESS_JOBGROUP_HOSTS": "10.0.0.5 trainer-0.rl"}}
    assert add_job_group_hosts(config, hosts) and add_job_group_hosts(config, hosts)
    assert hosts.read_text().count("10.0.0.5 trainer-0.rl") == 1
    assert not add_job_group_hosts({**config, "cloud": "local"}, tmp_path / "other")


def test_plan_shows_a_group_launched_together_without_egress(tmp_path, monkeypatch) -> None:
    from pathlib import Path

    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path))
    example = Path(__file__).resolve().parents[2] / "examples" / "job_group.yaml"
    result = CliRunner().invoke(app, ["plan", str(example)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Chosen plan: job group rl-group, tasks launched together" in result.output
    assert "Egress" not in result.output
    assert "3 tasks launched together, each on its own cluster" in result.output
    stops = "when trainer end(s), replay-buffer, env-worker stop(s) after termination_delay 30s"
    assert stops in result.output
