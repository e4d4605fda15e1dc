"""A new user's first hour at the installed `skyless` on a fresh HOME: a job finishes before any notification
is set up, then `notify set` and a restart of the local runtime (which replays the events stream from its
start). The old job is not announced; the next job is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slack_webhook import SlackWebhook

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    values = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_"))}
    values.update(HOME=str(tmp_path), SKYLESS_LOCAL_MOTO_PORT=str(free_port()),
                  SKYLESS_LOCAL_API_PORT=str(free_port()), SKYLESS_LOCAL_SNAPSHOT_SECONDS="1")  # fmt: skip
    yield values
    subprocess.run([str(SKYLESS), "local", "down"], env=values, capture_output=True, timeout=120, check=False)


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


def skyless(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([str(SKYLESS), *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=300, cwd=ROOT, check=False)  # fmt: skip
    assert done.returncode == 0, f"skyless {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def job_id_in(text: str) -> str:
    return text.split("Job ", 1)[1].split()[0]


def test_jobs_that_ended_before_notify_set_are_not_announced_after_a_restart(
    env: dict[str, str], webhook: SlackWebhook
) -> None:
    old = job_id_in(skyless(env, "launch", "examples/hello.yaml"))  # waits for SUCCEEDED
    skyless(env, "notify", "set", "--slack-webhook", "-", stdin=webhook.url + "\n")
    time.sleep(2)  # the runtime's snapshot holds the new settings
    skyless(env, "local", "down")
    skyless(env, "local", "up")

    new = job_id_in(skyless(env, "launch", "examples/hello.yaml"))
    deadline = time.monotonic() + 60
    while not any(new in str(p) for p in webhook.posts) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert any(new in str(p) and "succeeded" in p["text"] for p in webhook.posts), webhook.posts
    assert not any(old in str(p) for p in webhook.posts), [p["text"] for p in webhook.posts]
