"""Webhooks reach only public hosts: refused when set (a 400 naming the field) and again, pinned, at every
send; redirects are not followed and nothing a remote answers reaches the caller."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from chalice.test import Client
from fakes.http_server import FakeServer
from werkzeug.wrappers import Request, Response

from functions.submit.app import app
from shared.config import Settings
from shared.notifications import outbound_http
from shared.notifications.outbound_http import PinnedClient, address_problem
from shared.notifications.settings import update_user_settings
from shared.notifications.slack import post_to_slack
from shared.store.users import create_user, users_model

HOOK_PATH = "/services/T0000/B0000/XXXXsecretXXXX"
REMOTE_SECRET = "ami-id\ninstance-id\niam/security-credentials/node-role"  # what a metadata service answers

REFUSED_ADDRESSES = [
    "127.0.0.1", "127.8.9.10", "::1", "10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1",
    "100.64.0.1", "fc00::1", "fd12:3456::1", "169.254.169.254", "fd00:ec2::254", "169.254.0.1", "fe80::1",
    "224.0.0.1", "239.1.2.3", "ff02::1", "0.0.0.0", "::", "255.255.255.255", "240.0.0.1", "192.0.2.1",
    "::ffff:10.0.0.1", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a00:1::1",
]  # fmt: skip
PUBLIC_ADDRESSES = ["93.184.216.34", "3.5.140.2", "2606:4700::6810:84e5", "64:ff9b::5db8:d822"]


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
def test_loopback_private_link_local_metadata_multicast_and_reserved_addresses_are_refused(
    address: str,
) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_unicast_addresses_are_allowed(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


def test_the_local_setting_allows_loopback_and_nothing_else() -> None:
    allowed = [
        a for a in REFUSED_ADDRESSES if address_problem(ipaddress.ip_address(a), allow_loopback=True) is None
    ]
    assert allowed == ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"]


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """A resolver of our own: names in the dict resolve to its addresses, IP literals to themselves,
    any other name fails as an unknown name does."""
    table: dict[str, list[str]] = {}

    def resolve(host: str, port: int) -> list[Any]:
        if host in table:
            return [ipaddress.ip_address(a) for a in table[host]]
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None

    monkeypatch.setattr(outbound_http, "resolve_addresses", resolve)
    return table


@pytest.fixture
def deployed(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The stack as deployed: loopback webhooks not allowed (the API reads the environment)."""
    monkeypatch.setenv("SKYLESS_ALLOW_LOOPBACK_WEBHOOKS", "0")
    monkeypatch.setenv("SKYLESS_NOTIFY_BACKOFF_SECONDS", "0")
    return stack.with_(allow_loopback_webhooks=False)


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
def api(stack: Settings) -> Iterator[Api]:
    with Client(app) as client:
        yield Api(client, create_user("alice", stack))


class Recorder:
    """A webhook-shaped server that answers what it is told and counts what reached it."""

    def __init__(self, status: int = 200, body: str = "ok", headers: dict[str, str] | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or {}
        self.requests: list[dict[str, str]] = []
        self.server = FakeServer(self._handle)

    def _handle(self, request: Request) -> Response:
        self.requests.append({"host": request.host, "path": request.path})
        return Response(self.body, status=self.status, headers=self.headers)


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    made: list[Recorder] = []
    yield made
    for recorder in made:
        recorder.server.stop()


def serve(recorders: list[Recorder], **kwargs: Any) -> Recorder:
    recorder = Recorder(**kwargs)
    recorder.server.start()
    recorders.append(recorder)
    return recorder


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/services/T/B/x",
        "https://localhost/services/T/B/x",
        "https://10.1.2.3/services/T/B/x",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fd00:ec2::254]/latest/meta-data/",
        "https://[::ffff:10.0.0.1]/hook",
        "https://2130706433/hook",  # 127.0.0.1 written as one number
        "https://hooks.internal.example/services/T/B/x",  # a name that resolves to a private address
        "http://hooks.slack.com/services/T/B/x",  # not https
        "https://user:pw@hooks.slack.com/services/T/B/x",
    ],
)
def test_setting_a_webhook_to_a_non_public_host_is_a_400_naming_the_field(
    api: Api, deployed: Settings, dns: dict[str, list[str]], url: str
) -> None:
    dns["localhost"] = ["127.0.0.1", "::1"]
    dns["2130706433"] = ["127.0.0.1"]
    dns["hooks.internal.example"] = ["93.184.216.34", "10.0.0.7"]  # one bad address is enough

    answer = api.call("PUT", "/notifications", {"slack_webhook": url})

    assert answer.status_code == 400, answer.json_body
    assert answer.json_body["field"] == "slack_webhook"
    assert answer.json_body["message"].startswith("refused webhook URL")
    assert "10.0.0.7" not in answer.json_body["message"]  # what a name resolves to is not told
    assert api.call("GET", "/notifications").json_body["configured"] is False


def test_launch_with_a_private_notify_slack_is_a_400_and_no_job(
    api: Api, deployed: Settings, dns: dict[str, list[str]]
) -> None:
    dns["hooks.internal.example"] = ["10.0.0.7"]
    body = {
        "task": "name: hi\nresources:\n  cpus: 2+\nrun: echo hi\n",
        "notify": {"slack_webhook": "https://hooks.internal.example/services/T/B/x"},
    }

    answer = api.call("POST", "/jobs", body)

    assert answer.status_code == 400 and answer.json_body["field"] == "notify.slack_webhook"
    assert api.call("GET", "/jobs").json_body["jobs"] == []


def test_a_name_that_does_not_resolve_yet_is_accepted_and_checked_at_send(
    api: Api, deployed: Settings, dns: dict[str, list[str]]
) -> None:
    answer = api.call("PUT", "/notifications", {"slack_webhook": "https://hooks.slack.com/services/T/B/x"})
    assert answer.status_code == 200, answer.json_body

    test = api.call("POST", "/notifications/test").json_body

    (delivery,) = test["deliveries"]
    assert delivery["status"] == "failed" and "did not resolve" in delivery["error"]


def test_a_name_rebound_to_a_private_address_after_it_was_set_is_refused_at_send(
    api: Api, deployed: Settings, dns: dict[str, list[str]]
) -> None:
    dns["hooks.example.test"] = ["93.184.216.34"]
    url = "https://hooks.example.test/services/T/B/x"
    assert api.call("PUT", "/notifications", {"slack_webhook": url}).status_code == 200
    dns["hooks.example.test"] = ["169.254.169.254"]

    test = api.call("POST", "/notifications/test").json_body

    (delivery,) = test["deliveries"]
    assert delivery["status"] == "failed" and delivery["attempts"] == 1
    assert delivery["error"] == "refused: the host resolves to the cloud metadata service"


def test_a_loopback_webhook_stored_locally_is_refused_when_sent_by_a_deployed_stack(
    stack: Settings, deployed: Settings, api: Api, recorders: list[Recorder]
) -> None:
    hook = serve(recorders)
    (alice,) = users_model(stack).scan()
    update_user_settings(stack, alice.user_id, slack_webhook=hook.server.url + HOOK_PATH)  # allowed locally

    test = api.call("POST", "/notifications/test").json_body

    (delivery,) = test["deliveries"]
    assert delivery["status"] == "failed" and delivery["error"] == "refused: must be https://"
    assert hook.requests == []


@pytest.mark.parametrize("status", [400, 403, 500])
def test_the_test_endpoint_never_echoes_what_the_remote_answered(
    api: Api, stack: Settings, recorders: list[Recorder], monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv("SKYLESS_NOTIFY_BACKOFF_SECONDS", "0")
    hook = serve(recorders, status=status, body=REMOTE_SECRET)
    assert (
        api.call("PUT", "/notifications", {"slack_webhook": hook.server.url + HOOK_PATH}).status_code == 200
    )

    answer = api.call("POST", "/notifications/test")

    assert answer.status_code == 200
    (delivery,) = answer.json_body["deliveries"]
    assert delivery["status"] == "failed" and delivery["error"] == f"HTTP {status}"
    assert "instance-id" not in json.dumps(answer.json_body)
    assert "XXXXsecretXXXX" not in json.dumps(answer.json_body)


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "second-server"])
def test_a_redirect_is_not_followed(
    api: Api, stack: Settings, recorders: list[Recorder], target: str
) -> None:
    second = serve(recorders, body=REMOTE_SECRET)
    location = second.server.url + "/inside" if target == "second-server" else target
    hook = serve(recorders, status=302, body="moved", headers={"Location": location})
    assert (
        api.call("PUT", "/notifications", {"slack_webhook": hook.server.url + HOOK_PATH}).status_code == 200
    )

    answer = api.call("POST", "/notifications/test")

    (delivery,) = answer.json_body["deliveries"]
    assert delivery["status"] == "failed" and delivery["attempts"] == 1
    assert delivery["error"] == "HTTP 302 (a redirect; webhooks are not redirected)"
    assert len(hook.requests) == 1 and second.requests == []
    assert location not in json.dumps(answer.json_body) and "instance-id" not in json.dumps(answer.json_body)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def https_hook(ca: trustme.CA, recorders: list[Recorder], certificate_for: str) -> Recorder:
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(certificate_for).configure_cert(server_context)
    recorder = Recorder()
    recorder.server = FakeServer(recorder._handle, ssl_context=server_context)
    recorder.server.start()
    recorders.append(recorder)
    return recorder


def client_trusting(ca: trustme.CA) -> PinnedClient:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return PinnedClient(allow_loopback=True, verify=context)


def test_the_post_goes_to_the_checked_address_with_the_host_name_for_tls_and_host(
    ca: trustme.CA, recorders: list[Recorder], dns: dict[str, list[str]]
) -> None:
    hook = https_hook(ca, recorders, "hooks.example.test")
    dns["hooks.example.test"] = ["127.0.0.1"]
    url = f"https://hooks.example.test:{hook.server.port}{HOOK_PATH}"

    with client_trusting(ca) as client:
        delivery = post_to_slack(url, {"text": "hi"}, client=client, sleep=lambda _: None)

    assert delivery.ok, delivery
    assert hook.requests == [{"host": f"hooks.example.test:{hook.server.port}", "path": HOOK_PATH}]


def test_a_certificate_for_another_name_fails_even_at_the_checked_address(
    ca: trustme.CA, recorders: list[Recorder], dns: dict[str, list[str]]
) -> None:
    hook = https_hook(ca, recorders, "someone-else.example.test")
    dns["hooks.example.test"] = ["127.0.0.1"]
    url = f"https://hooks.example.test:{hook.server.port}{HOOK_PATH}"

    with client_trusting(ca) as client:
        delivery = post_to_slack(url, {"text": "hi"}, client=client, max_attempts=1)

    assert not delivery.ok and delivery.error == "network error (ConnectError)"
    assert hook.requests == []
