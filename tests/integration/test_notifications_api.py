"""`/notifications` through the Chalice test client, the per-submission override, and the CLI verbs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from chalice.test import Client
from conftest import sent_mail
from fakes.slack_webhook import SlackWebhook
from test_notifications_flow import stack_tables

from functions.submit.app import app
from shared.config import Settings
from shared.notifications.settings import channels_for
from shared.store.users import create_user, users_model
from shared.wiring import wiring_for

TASK = "name: hello\nresources:\n  cpus: 2+\nrun: echo hello\n"


class Api:
    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        send = getattr(self.client.http, method.lower())
        if method == "GET":
            return send(path, headers=self.headers)
        return send(path, headers=self.headers, body=json.dumps(body or {}))


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


@pytest.fixture
def api(stack: Settings) -> Iterator[Api]:
    with Client(app) as client:
        yield Api(client, create_user("alice", stack))


def user_id(stack: Settings) -> str:
    return next(iter(users_model(stack).scan())).user_id


def test_nothing_configured_is_said_plainly(api: Api) -> None:
    answer = api.call("GET", "/notifications")
    assert answer.status_code == 200
    assert answer.json_body["configured"] is False
    assert answer.json_body["message"].startswith("no notifications: nothing is configured")
    test = api.call("POST", "/notifications/test")
    assert test.status_code == 200 and test.json_body["deliveries"] == []


def test_set_show_and_test_mask_the_webhook_and_deliver(
    api: Api, stack: Settings, webhook: SlackWebhook, moto_endpoint: str
) -> None:
    address = f"api-{stack.prefix}@example.com"
    answer = api.call(
        "PUT", "/notifications", {"slack_webhook": webhook.url, "email": address, "on": ["failed"]}
    )
    assert answer.status_code == 200, answer.json_body
    shown = api.call("GET", "/notifications").json_body
    assert shown["configured"] is True and shown["email"] == address and shown["on"] == ["failed"]
    assert shown["slack_webhook"].endswith("XXXX") and "secret" not in shown["slack_webhook"]
    assert "XXXXsecretXXXX" not in json.dumps(answer.json_body)

    test = api.call("POST", "/notifications/test").json_body
    assert [(d["channel"], d["status"]) for d in test["deliveries"]] == [("slack", "sent"), ("email", "sent")]
    assert "XXXXsecretXXXX" not in json.dumps(test)
    assert webhook.posts[0]["text"] == "skyless: test notification"
    mail = sent_mail(moto_endpoint)
    assert any(address in m["destinations"]["ToAddresses"] for m in mail)

    api.call("PUT", "/notifications", {"slack_webhook": None})  # clears Slack, keeps the rest
    shown = api.call("GET", "/notifications").json_body
    assert shown["slack_webhook"] is None and shown["email"] == address


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"slack_webhook": "not a url"}, "slack_webhook"),
        ({"email": "nobody"}, "email"),
        ({"on": ["exploded"]}, "on.0"),
        ({"slak_webhook": "https://hooks.slack.com/x"}, "slak_webhook"),
    ],
)
def test_bad_settings_are_4xx_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    answer = api.call("PUT", "/notifications", body)
    assert answer.status_code in (400, 422), answer.json_body
    assert answer.json_body["field"] == field
    assert "not a url" not in json.dumps(answer.json_body)


def test_a_submission_override_is_kept_as_a_secret_reference(
    api: Api, stack: Settings, webhook: SlackWebhook
) -> None:
    body = {
        "task": TASK,
        "filename": "hello.yaml",
        "notify": {"slack_webhook": webhook.url, "email": "o@example.com"},
    }
    answer = api.call("POST", "/jobs", body)
    assert answer.status_code == 201, answer.json_body
    job_id = answer.json_body["job_id"]
    item = wiring_for(stack).notifications.read(f"job#{job_id}")
    assert item is not None and item.email == "o@example.com"
    assert item.slack_secret and "XXXXsecretXXXX" not in item.slack_secret
    channels = channels_for(stack, user_id(stack), job_id)
    assert channels.slack_webhook == webhook.url and channels.email == "o@example.com"
    detail = api.call("GET", f"/jobs/{job_id}").json_body
    assert "XXXXsecretXXXX" not in json.dumps(detail)
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
    tables = stack_tables(stack)
    assert f"{stack.prefix}-jobs" in tables
    for table in tables:
        assert "XXXXsecretXXXX" not in str(dynamodb.scan(TableName=table)["Items"]), table


def test_a_bad_override_is_refused_before_anything_is_recorded(api: Api) -> None:
    answer = api.call("POST", "/jobs", {"task": TASK, "notify": {"email": "nope"}})
    assert answer.status_code == 400 and answer.json_body["field"] == "notify.email"
    assert api.call("GET", "/jobs").json_body["jobs"] == []
