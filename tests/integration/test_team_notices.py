"""A team budget's notices reach the whole team, not only whoever had a job running: the sweep's budget checks
(shared/jobs/budget_checks.py, as tests/integration/test_team_budgets.py runs them) cross the thresholds, the
events stream goes through the real
notify handler to real local Slack webhooks, and the team's own channel is set through the CLI and the API.

Two teams on one stack: alice and carol in `ml` (carol its admin), bob in `nlp`. Only alice has a job
running; carol, who has none, is told each threshold once, and so is the team's Slack channel; bob (another
team) hears nothing. An outsider can neither read nor set a team's channel; a member who is not its admin
cannot set it; the webhook is kept as a secret and never shown in clear."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.slack_webhook import SlackWebhook
from test_budgets import _launch, _run, _running
from test_team_budgets import Teams, _job_id
from test_team_budgets import teams as teams

from functions.notify.handler import handler as notify_handler
from local_runtime.events_stream import EventsStreamReader
from shared.config import Settings
from shared.jobs.budget_checks import BudgetSweep
from shared.wiring import wiring_for


@pytest.fixture
def hooks() -> Iterator[dict[str, SlackWebhook]]:
    started = {who: SlackWebhook().start() for who in ("alice", "carol", "bob", "ml", "nlp")}
    yield started
    for hook in started.values():
        hook.stop()


def _budget_posts(hook: SlackWebhook) -> list[str]:
    return [str(post["text"]) for post in hook.posts if "budget" in str(post["text"])]


def _stream_to_notify(reader: EventsStreamReader) -> list[dict[str, Any]]:
    records = reader.poll()
    assert notify_handler({"Records": records}, None) == {"batchItemFailures": []}
    return records


def test_every_member_and_the_teams_channel_hear_each_threshold_once_and_no_other_team_does(
    stack: Settings, teams: Teams, hooks: dict[str, SlackWebhook], tmp_path: Any
) -> None:
    for who in ("alice", "carol", "bob"):
        answer = teams.api(who, "PUT", "/notifications", json={"slack_webhook": hooks[who].url})
        assert answer.status_code == 200, answer.text
    made = _run("admin", "teams", "add", "ml", teams.ids["carol"], "--team-admin", *teams.admin)
    assert made.exit_code == 0, made.output
    set_ml = _run("team", "notify", "ml", "--slack", hooks["ml"].url, *teams.carol)
    assert set_ml.exit_code == 0 and "team ml's budget notices go to Slack" in set_ml.output, set_ml.output
    assert "XXXXsecretXXXX" not in set_ml.output  # masked: the host and the last 4 characters
    assert teams.api("admin", "PUT", "/teams/nlp/notify", json={"slack_webhook": hooks["nlp"].url}).is_success

    alices = _job_id(_launch(teams.alice, tmp_path).output)
    bobs = _job_id(_launch(teams.bob, tmp_path).output)
    _running(stack, alices, price=0.6, hours=1.0)  # ml: $0.60, carol has no job at all
    _running(stack, bobs, price=0.6, hours=1.0)
    assert (
        _run("budget", "set", "--team", "ml", "--monthly", "0.5", "--action", "warn", *teams.admin).exit_code
        == 0
    )
    assert _run("budget", "set", "--team", "nlp", "--monthly", "100", *teams.admin).exit_code == 0

    reader, wiring = EventsStreamReader(stack), wiring_for(stack)
    for _ in range(2):  # two sweeps (the nodes here are not the cloud's: the sweep's budget checks alone)
        sweep = BudgetSweep(wiring, time.time())
        assert [sweep.check(wiring.store.get(j)) for j in (alices, bobs)] == ["warned", None]  # type: ignore[arg-type]
        batch = _stream_to_notify(reader)
        assert notify_handler({"Records": batch}, None) == {"batchItemFailures": []}
    _stream_to_notify(reader)  # the notifier's own notes come round: they tell nothing

    for who in ("alice", "carol", "ml"):
        posts = _budget_posts(hooks[who])
        assert posts == [f"skyless: team ml reached {p} % of its monthly budget" for p in (50, 80, 100)], (
            who,
            posts,
        )
    assert _budget_posts(hooks["bob"]) == [] and _budget_posts(hooks["nlp"]) == []
    last = hooks["carol"].posts[-1]
    assert "monthly budget of team ml for" in str(last) and "new launches are refused" in str(last), last
    assert "skyless budget show --team ml" in str(last)

    notes = [e for e in wiring.store.timeline(alices) if e.kind == "budget"]
    assert [int(e.detail["percent"]) for e in notes] == [50, 80, 100]  # type: ignore[index]
    assert wiring.store.get(alices).state == "RUNNING"  # type: ignore[union-attr]  # warn only
    sent = [e for e in wiring.store.timeline("team#ml") if e.kind == "notify"]
    assert sorted(str(e.detail["to"]) for e in sent) == sorted(
        [teams.ids["alice"], teams.ids["carol"], "(the team's channel)"] * 3
    )  # type: ignore[index]


def test_an_outsider_can_neither_read_nor_set_a_teams_channel_and_a_member_only_read_it(
    stack: Settings, teams: Teams, hooks: dict[str, SlackWebhook]
) -> None:
    assert teams.api("admin", "PUT", "/teams/ml/notify", json={"slack_webhook": hooks["ml"].url}).is_success

    bobs_read = teams.api("bob", "GET", "/teams/ml/notify")
    bobs_set = teams.api("bob", "PUT", "/teams/ml/notify", json={"slack_webhook": hooks["bob"].url})
    assert (
        bobs_read.status_code == 404 and "hooks" not in bobs_read.text and "127.0.0.1" not in bobs_read.text
    )
    assert bobs_set.status_code == 404, bobs_set.text
    by_cli = _run("team", "notify", "ml", "--clear", *teams.bob)
    assert by_cli.exit_code != 0 and "no team ml" in by_cli.output and "Traceback" not in by_cli.output

    alices_set = _run(
        "team", "notify", "ml", "--slack", hooks["alice"].url, *teams.alice
    )  # a member, no admin
    assert alices_set.exit_code != 0 and "team's admin" in alices_set.output, alices_set.output
    shown = _run("team", "notify", "ml", *teams.alice)
    assert shown.exit_code == 0 and "Slack http://127.0.0.1" in shown.output, shown.output
    assert "XXXXsecretXXXX" not in shown.output and "…" in shown.output

    bad = teams.api("admin", "PUT", "/teams/ml/notify", json={"slack_webhook": "not a url"})
    assert bad.status_code == 400 and "slack_webhook" in bad.text, bad.text
    unknown = teams.api("admin", "PUT", "/teams/ml/notify", json={"slack": hooks["ml"].url})
    assert unknown.status_code == 422 and "slack_webhook" in unknown.text, unknown.text  # not ignored
    both = _run("team", "notify", "ml", "--slack", hooks["ml"].url, "--clear", *teams.admin)
    assert both.exit_code != 0 and "--clear" in both.output

    item = wiring_for(stack).notifications.read("team#ml")
    assert item is not None and item.slack_secret and "hooks" not in item.slack_secret  # the secret's name
    assert "127.0.0.1" not in str(item.attribute_values)
    cleared = _run("team", "notify", "ml", "--clear", *teams.admin)
    assert cleared.exit_code == 0 and "has no Slack channel" in cleared.output, cleared.output
    assert _budget_posts(hooks["ml"]) == [] and hooks["bob"].posts == []
