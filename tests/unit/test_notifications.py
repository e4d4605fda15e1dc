"""Which events notify, the Slack message, and webhook retries against a real local HTTP server."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fakes.slack_webhook import SlackWebhook

from shared.notifications.events import JobFacts, TimelineRecord, compose, topic_of
from shared.notifications.records import send_key
from shared.notifications.slack import post_to_slack, slack_payload


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


def state(name: str, message: str = "") -> TimelineRecord:
    return TimelineRecord(job_id="job-0123456789ab", at="1", kind="state", state=name, message=message)


@pytest.mark.parametrize(
    ("record", "earlier", "topic"),
    [
        (state("SUCCEEDED"), [], "succeeded"),
        (state("FAILED", "exit code 1 on rank 0"), [], "failed"),
        (state("FAILED", "no capacity anywhere after 3 rounds (...)"), [], "no_capacity"),
        (state("FAILED_NO_RESOURCE", "no capacity anywhere after 3 rounds (...)"), [], "no_capacity"),
        (state("FAILED_SETUP", "node rank 0 failed with exit code 3: setup exited with 3"), [], "failed"),
        (state("RECOVERING"), ["PLANNED", "RUNNING"], "preempted"),
        (state("RUNNING"), ["RUNNING", "RECOVERING", "PLANNED", "PROVISIONING", "SETTING_UP"], "recovered"),
        (state("RUNNING"), ["PENDING", "PLANNED", "PROVISIONING", "SETTING_UP"], None),
        (state("RUNNING"), ["RECOVERING", "PLANNED", "RUNNING", "PLANNED", "SETTING_UP"], None),
        (state("WAITING"), ["PLANNED", "PROVISIONING"], "no_capacity"),
        (state("WAITING"), ["PLANNED", "PROVISIONING", "WAITING", "PROVISIONING"], None),
        (state("CANCELLED"), [], None),
        (TimelineRecord("job-0123456789ab", "1", "notify", "SUCCEEDED", "slack notification sent"), [], None),
        (TimelineRecord("job-0123456789ab", "1", "node", None, "rank 0 running"), [], None),
    ],
)
def test_topic_of_each_timeline_event(record: TimelineRecord, earlier: list[str], topic: str | None) -> None:
    assert topic_of(record, earlier) == topic


FACTS = JobFacts(
    job_id="job-0123456789ab",
    name="train",
    state="RECOVERING",
    cloud="aws",
    region="us-east-1",
    zone="us-east-1a",
    instance_type="p3.2xlarge",
    use_spot=True,
    cost=1.23456,
)


def test_slack_payload_names_job_state_place_spot_cost_and_logs_command() -> None:
    notification = compose("preempted", state("RECOVERING", "node rank 0 was preempted"), FACTS)
    payload = slack_payload(notification)
    text = str(payload)
    assert payload["blocks"][0]["type"] == "header"
    assert "train was preempted" in payload["text"]
    for expected in ("job-0123456789ab", "RECOVERING", "aws/us-east-1a p3.2xlarge", "spot", "$1.2346"):
        assert expected in text
    assert "skyless logs job-0123456789ab" in text
    assert "node rank 0 was preempted" in text


def test_the_email_text_names_the_logs_command_once() -> None:
    text = compose("succeeded", state("SUCCEEDED", "every node exited 0"), FACTS).text()
    assert text.count("skyless logs job-0123456789ab") == 1
    assert "Cost so far: $1.2346" in text


def test_429_then_200_is_retried_after_retry_after_and_delivered_once(webhook: SlackWebhook) -> None:
    webhook.fail_first(429, retry_after="2")
    waits: list[float] = []
    delivery = post_to_slack(webhook.url, {"text": "hi"}, sleep=waits.append, allow_loopback=True)
    assert delivery.ok and delivery.attempts == 2
    assert waits == [2.0]
    assert webhook.attempts == 2 and webhook.posts == [{"text": "hi"}]


def test_5xx_is_retried_with_exponential_backoff(webhook: SlackWebhook) -> None:
    webhook.fail_first(500, times=2)
    waits: list[float] = []
    delivery = post_to_slack(
        webhook.url, {"text": "hi"}, backoff_seconds=0.5, sleep=waits.append, allow_loopback=True
    )
    assert delivery.ok and delivery.attempts == 3
    assert waits == [0.5, 1.0]
    assert len(webhook.posts) == 1


def test_dead_webhook_fails_after_max_attempts_and_the_error_hides_the_url(webhook: SlackWebhook) -> None:
    webhook.fail_first(503, times=10)
    delivery = post_to_slack(
        webhook.url, {"text": "hi"}, max_attempts=3, sleep=lambda _: None, allow_loopback=True
    )
    assert not delivery.ok and delivery.attempts == 3 and webhook.attempts == 3
    assert "503" in (delivery.error or "")
    assert "XXXXsecretXXXX" not in str(delivery.as_dict())


def test_a_revoked_webhook_404_is_not_retried(webhook: SlackWebhook) -> None:
    delivery = post_to_slack(
        webhook.url + "-revoked", {"text": "hi"}, sleep=lambda _: None, allow_loopback=True
    )
    assert not delivery.ok and delivery.attempts == 1


def test_nothing_listening_is_a_failed_delivery_not_an_exception() -> None:
    delivery = post_to_slack(
        "http://127.0.0.1:9/hook", {"text": "hi"}, max_attempts=2, sleep=lambda _: None, allow_loopback=True
    )
    assert not delivery.ok and delivery.attempts == 2 and "network error" in (delivery.error or "")


def test_the_sam_template_feeds_notify_from_the_events_stream_with_partial_batches() -> None:
    from pathlib import Path

    from cfnlint.decode import decode

    template, problems = decode(str(Path(__file__).resolve().parents[2] / "infra" / "template.yaml"))
    assert not problems
    resources = template["Resources"]
    assert resources["EventsTable"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    notify = resources["NotifyFunction"]["Properties"]
    assert notify["Handler"] == "functions.notify.handler.handler"
    (event,) = notify["Events"].values()
    assert event["Type"] == "DynamoDB"
    assert event["Properties"]["Stream"] == {"Fn::GetAtt": ["EventsTable", "StreamArn"]}
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert event["Properties"]["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": ["NotifyFailuresQueue", "Arn"]
    }
    assert "secretsmanager:GetSecretValue" in str(notify["Policies"])
    assert "secretsmanager:CreateSecret" not in str(notify["Policies"])  # notify only reads webhooks


def test_httpx_request_log_shows_the_webhook_masked(
    webhook: SlackWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    assert post_to_slack(webhook.url, {"text": "hi"}, allow_loopback=True).ok
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP Request: POST" in logged and "…XXXX" in logged
    assert "XXXXsecretXXXX" not in logged


def test_two_events_of_one_transition_share_a_send_key() -> None:
    first = send_key("job-0123456789ab", "1795308531.567123#v00005", "slack")
    assert first == send_key("job-0123456789ab", "1795308531.569943#v00005", "slack")
    assert first != send_key("job-0123456789ab", "1795308531.569943#v00006", "slack")
    assert send_key("job-1", "1.0#ab12cd34", "email") != send_key("job-1", "2.0#ab12cd34", "email")
