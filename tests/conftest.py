"""Shared fixtures: one moto server (real HTTP) per session, and a fresh stack per test."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from memory_stack import MemoryQueueDriver, MemoryQueues, memory_stack

from local_runtime.moto_endpoint import start_moto
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.config.env_names import (
    ENV_AGENT_SECRET,
    ENV_API_URL,
    ENV_AWS_ENDPOINT_URL,
    ENV_HOME,
    ENV_LOCAL_API_PORT,
    ENV_LOCAL_MOTO_PORT,
    ENV_PREFIX,
)
from shared.stack import create_stack

# tests/unit (no endpoint), tests/integration (moto server, local-cloud processes, fake clouds), tests/e2e
# (the whole local runtime). A few test modules reuse another's helpers across tiers, so every tier is
# importable by module name, as `fakes` is.
for _tier in ("unit", "integration", "e2e"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _tier))

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto server on a free port of 127.0.0.1; AWS_ENDPOINT_URL and fake credentials point at it."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = _free_port()
    # The same server the local runtime embeds: plain moto's TransactWriteItems is not safe against
    # concurrent writers (it copies and restores whole tables), which real DynamoDB is.
    server = start_moto(port)
    url = f"http://127.0.0.1:{port}"
    _IN_PROCESS_MOTO.add(url)
    saved = {name: os.environ.get(name) for name in [*FAKE_AWS_ENV, ENV_AWS_ENDPOINT_URL]}
    os.environ.update(FAKE_AWS_ENV)
    os.environ[ENV_AWS_ENDPOINT_URL] = url
    try:
        yield url
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


UNIT_TIER = Path(__file__).resolve().parent / "unit"


def _in_unit_tier(request: pytest.FixtureRequest) -> bool:
    return UNIT_TIER in Path(request.node.path).resolve().parents


@pytest.fixture
def memory_queues() -> MemoryQueues:
    return MemoryQueues()


@pytest.fixture
def stack(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    """Fresh tables/queues/bucket under a unique prefix; the environment is set so handlers see them.
    At the end, every local-cloud node the test started is terminated (nothing outlives a test).
    Under tests/unit, the same with every adapter in memory (tests/memory_stack.py), no endpoint."""
    if _in_unit_tier(request):
        with memory_stack(
            tmp_path / "skyless-home", monkeypatch, request.getfixturevalue("memory_queues")
        ) as memory:
            yield memory
        return
    moto_endpoint: str = request.getfixturevalue("moto_endpoint")
    settings = Settings(
        prefix=f"t{uuid.uuid4().hex[:10]}",
        region=FAKE_AWS_ENV["AWS_DEFAULT_REGION"],
        endpoint_url=moto_endpoint,
        home=tmp_path / "skyless-home",
        providers="*=local",
        api_url="http://127.0.0.1:9",  # nothing listens: tests that need the API start their own
        allow_loopback_webhooks=True,  # as in the local runtime: the tests' webhooks are local servers
    )
    settings.home.mkdir(parents=True, exist_ok=True)
    create_stack(settings)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_AGENT_SECRET, "test-agent-secret")
    yield settings
    cloud = LocalCloud(settings.home)
    for cluster_id in {node.cluster_id for node in cloud.list_owned()}:
        cloud.terminate(cluster_id)


class QueueDriver:
    """Delivers a stack's queue messages to handlers as Lambda would: an SQS event of received records."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sqs = boto3.client("sqs", endpoint_url=settings.endpoint_url, region_name=settings.region)

    def url(self, kind: str) -> str:
        return self.sqs.get_queue_url(QueueName=self.settings.queue_name(kind))["QueueUrl"]

    def receive(self, kind: str, wait_seconds: int = 0) -> list[dict[str, Any]]:
        """Every visible message of a queue (deleted from it), as SQS event records; for "provision", the
        teardown queue's first (the provision function reads both, as the template wires it)."""
        if kind == "provision":
            return self._receive("teardown", 0) + self._receive("provision", wait_seconds)
        return self._receive(kind, wait_seconds)

    def _receive(self, kind: str, wait_seconds: int) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        while True:
            answer = self.sqs.receive_message(
                QueueUrl=self.url(kind), MaxNumberOfMessages=10, WaitTimeSeconds=wait_seconds,
                AttributeNames=["All"],
            )  # fmt: skip
            messages = answer.get("Messages", [])
            if not messages:
                return records
            for message in messages:
                self.sqs.delete_message(QueueUrl=self.url(kind), ReceiptHandle=message["ReceiptHandle"])
                records.append(
                    {
                        "messageId": message["MessageId"],
                        "receiptHandle": message["ReceiptHandle"],
                        "body": message["Body"],
                        "attributes": message.get("Attributes", {}),
                        "messageAttributes": {},
                        "eventSource": "aws:sqs",
                        "eventSourceARN": f"arn:aws:sqs:{self.settings.region}:123456789012:{kind}",
                        "awsRegion": self.settings.region,
                    }
                )
            wait_seconds = 0

    def bodies(self, kind: str) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.receive(kind)]

    def delayed_count(self, kind: str) -> int:
        """Messages sent with a delay that are not visible yet."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.url(kind), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessagesDelayed"])

    @staticmethod
    def event(records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Records": records}


@pytest.fixture
def queues(request: pytest.FixtureRequest, stack: Settings) -> QueueDriver | MemoryQueueDriver:
    if _in_unit_tier(request):
        return MemoryQueueDriver(stack, request.getfixturevalue("memory_queues"))
    return QueueDriver(stack)


@pytest.fixture
def cli_api(stack: Settings) -> Iterator[list[str]]:
    """The API served over real HTTP on a free port; the CLI flags that point at it as a fresh user."""
    from functions.submit.app import app
    from local_runtime.api_server import ApiServer
    from shared.store.users import create_user

    server = ApiServer(app, "127.0.0.1", _free_port())
    server.start()
    try:
        yield ["--api-url", server.url, "--api-key", create_user("cli-user", stack)]
    finally:
        server.stop()


def cli_user_id(cli_api: list[str], settings: Settings) -> str:
    """The user id behind `cli_api`'s key (`create_user` draws a fresh id: it is not "cli-user")."""
    from shared.store.users import find_user

    user = find_user(cli_api[cli_api.index("--api-key") + 1], settings)
    assert user is not None
    return user.user_id


_IN_PROCESS_MOTO: set[str] = set()  # endpoints of moto servers running in this process (moto_endpoint)


def sent_mail(endpoint: str) -> list[dict[str, Any]]:
    """The mail moto's SES has accepted, as `/moto-api/data.json` lists it. For the session's own server,
    read in this process, SES alone: the dump serializes every test's state, and one model whose property
    raises (late in a session) turns the whole dump into a 500."""
    if endpoint not in _IN_PROCESS_MOTO:
        import httpx

        return list(httpx.get(f"{endpoint}/moto-api/data.json", timeout=120).json()["ses"]["Message"])
    from moto.core.model_instances import model_data

    def public(message: Any) -> dict[str, Any]:
        found = {}
        for attr in dir(message):
            if not attr.startswith("_"):
                with contextlib.suppress(TypeError, AttributeError, ValueError):
                    found[attr] = json.loads(json.dumps(getattr(message, attr)))
        return found

    return [public(m) for m in model_data["ses"]["Message"].instances_tracked]  # type: ignore[attr-defined]


@pytest.fixture
def local_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Nothing configured: the CLI must start the local runtime itself (stopped at the end)."""
    from local_runtime import stop_local_runtime

    home = tmp_path / "skyless-home"
    for name in (ENV_API_URL, "SKYLESS_API_KEY", ENV_PREFIX, ENV_AWS_ENDPOINT_URL):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV_HOME, str(home))
    monkeypatch.setenv(ENV_LOCAL_MOTO_PORT, str(_free_port()))
    monkeypatch.setenv(ENV_LOCAL_API_PORT, str(_free_port()))
    try:
        yield home
    finally:
        stop_local_runtime(home)


@pytest.fixture
def sky_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A SkyPilot user's fresh HOME with an empty `~/.sky`, no SkyPilot config variables, the default catalog
    read anew, and the working directory beside it."""
    home = tmp_path / "home"
    (home / ".sky").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SKYLESS_HOME", str(home / ".skyless"))
    for name in ("SKYPILOT_CONFIG", "SKYPILOT_GLOBAL_CONFIG", "SKYPILOT_PROJECT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    from shared.catalog.model import reset_default_catalog

    reset_default_catalog()
    yield home
    reset_default_catalog()


@pytest.fixture
def alice_hook() -> Iterator[Any]:
    """A Slack webhook receiver (tests/fakes/slack_webhook.py) for the user alice, stopped after the test."""
    from fakes.slack_webhook import SlackWebhook

    server = SlackWebhook().start()
    yield server
    server.stop()


@pytest.fixture
def bob_hook() -> Iterator[Any]:
    """A second user's Slack webhook receiver."""
    from fakes.slack_webhook import SlackWebhook

    server = SlackWebhook().start()
    yield server
    server.stop()
