"""Every door a task file comes in by refuses the parser attacks of issue 19 with a 4xx (or, for an upload, a
report beside the file) naming the limit, the file and the line, quickly and in bounded memory: the real
Chalice app, the Lambda entry point the template names (an HTTP API event), and the submit handler given the
S3 event of an upload (moto's server)."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client
from conftest import QueueDriver, cli_user_id
from parse_attacks import ATTACKS
from test_api_bad_input import VIAS, call
from test_dashboard_pages import Browser
from test_uploads import deliver_submit, s3, upload
from typer.testing import CliRunner

from cli.main import app as cli
from functions.submit.app import app
from functions.submit.handler import handler as submit_handler
from shared.config import Settings
from shared.store.users import create_user
from shared.wiring import wiring_for

TASK_ROUTES = {  # every route that reads a task file, with the rest of a body it takes
    "/plan": {},
    "/jobs": {},
    "/schedules": {"name": "nightly", "cron": "0 3 * * *"},
    "/clusters/dev/launch": {},
}


@pytest.fixture
def key(stack: Settings) -> str:
    return create_user("alice", stack, user_id="u-alice")


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def measured(action: Any) -> tuple[Any, float, int]:
    """(what `action()` answers, the CPU time it took, the peak memory it allocated in bytes). Run twice:
    timed untraced (tracemalloc slows Python down several times), then traced for its memory. CPU, not wall
    time: this machine is shared, and the bound is about the work an attack makes us do."""
    start = time.process_time()
    answer = action()
    seconds = time.process_time() - start
    tracemalloc.start()
    try:
        action()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return answer, seconds, peak


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("path", sorted(TASK_ROUTES))
def test_each_route_that_reads_a_task_answers_each_attack_with_a_400_naming_the_limit(
    client: Client, key: str, via: str, path: str
) -> None:
    for attack, (text, _, line) in ATTACKS.items():
        body = json.dumps({"task": text, "filename": "evil.yaml", **TASK_ROUTES[path]})
        (status, answer), seconds, peak = measured(lambda b=body: call(via, client, key, "POST", path, b))
        assert status == 400, (attack, answer)
        assert answer["error"] == "TaskFileError" and answer["file"] == "evil.yaml", (attack, answer)
        assert answer["line"] == line, (attack, answer)
        assert "skyless's limit" in answer["message"] or "skyless reads at most" in answer["message"], answer
        assert seconds < 2 and peak < 60 * 1024**2, (attack, seconds, peak)


def test_nothing_is_recorded_for_a_refused_task(client: Client, key: str, stack: Settings) -> None:
    text = ATTACKS["billion laughs"][0]
    for path, extra in TASK_ROUTES.items():
        status, _ = call("chalice", client, key, "POST", path, json.dumps({"task": text, **extra}))
        assert status == 400
    assert call("chalice", client, key, "GET", "/jobs")[1]["jobs"] == []
    assert call("chalice", client, key, "GET", "/schedules")[1]["schedules"] == []
    assert call("chalice", client, key, "GET", "/clusters")[1]["clusters"] == []


def test_an_uploaded_attack_gets_a_report_beside_it_naming_the_limit(
    stack: Settings, queues: QueueDriver
) -> None:
    create_user("bob", stack, user_id="u-bob")
    for index, (attack, (text, _, line)) in enumerate(ATTACKS.items()):
        key = f"tasks/u-bob/evil-{index}.yaml"
        upload(stack, key, text)
        start = time.process_time()
        records = deliver_submit(queues, times=2)  # each event delivered twice
        seconds = time.process_time() - start
        tracemalloc.start()
        try:  # and once more, later, traced: a re-delivery reads the file again
            assert submit_handler(queues.event(records), None) == {"batchItemFailures": []}
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        report = json.loads(s3(stack).get_object(Bucket=stack.bucket, Key=key + ".error.json")["Body"].read())
        assert report["error"] == "TaskFileError" and report["file"] == key, (attack, report)
        assert report["line"] == line and "skyless" in report["message"], (attack, report)
        assert seconds < 3 and peak < 60 * 1024**2, (attack, seconds, peak)
        assert wiring_for(stack).store.timeline(f"upload#{key}")[0].kind == "upload_rejected"
    assert queues.bodies("optimize") == [] and queues.bodies("provision") == []


def test_cli_plan_and_launch_refuse_each_attack_naming_file_line_and_limit(
    tmp_path: Path, cli_api: list[str], stack: Settings
) -> None:
    for index, (attack, (text, _, line)) in enumerate(ATTACKS.items()):
        path = tmp_path / f"evil-{index}.yaml"
        path.write_text(text)
        for argv in (["plan", str(path)], ["launch", str(path), "-d", *cli_api]):
            start = time.process_time()
            result = CliRunner().invoke(cli, argv, env={"COLUMNS": "300"})
            assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (attack, result.output)
            assert f"{path}:{line}:" in result.output and "skyless" in result.output, (attack, result.output)
            assert "Traceback" not in result.output and time.process_time() - start < 3
    assert wiring_for(stack).store.jobs_of(cli_user_id(cli_api, stack)) == []


def test_the_dashboards_plan_form_answers_each_attack_with_a_400_page_naming_the_limit(
    client: Client, key: str
) -> None:
    browser = Browser(client)
    browser.sign_in(key)
    for attack, (text, _, line) in ATTACKS.items():
        form = {"csrf": browser.csrf("/dashboard/plan"), "filename": "evil.yaml", "task": text}
        start = time.process_time()
        page = browser.post("/dashboard/plan", form)
        assert time.process_time() - start < 2, attack
        body = page.body.decode()
        assert page.status_code == 400 and f"evil.yaml:{line}" in body, (attack, body[-2000:])
        assert "skyless&#39;s limit" in body or "skyless reads at most" in body, (attack, body[-2000:])
