"""The embedded endpoint (local_runtime/moto_endpoint.py) keeps a client's connection open between calls:
werkzeug's server closed every one, and each call of a handler paid a connect, a new server thread and the
hand-offs between them. A kept connection must still read each request to its end, and stopping the
endpoint must close what clients keep open."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from local_runtime.moto_endpoint import free_port, start_moto

# A small answer of moto's that does not depend on what earlier tests left in the process's moto backends
# (/moto-api/data.json dumps them all, and answers 500 once moto holds an object whose bucket a test deleted:
# this test failed so in a full CI run, and passed alone)
LIST_TABLES = {
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": "AWS4-HMAC-SHA256 Credential=k/20261127/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host, Signature=0",
}


@pytest.fixture
def endpoint() -> Iterator[tuple[Any, str]]:
    server = start_moto(free_port())
    host, port = server.get_host_and_port()
    try:
        yield server, f"http://{host}:{port}"
    finally:
        server.stop()


def client(service: str, url: str) -> Any:
    return boto3.client(
        service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
        config=Config(retries={"max_attempts": 1}),
    )  # fmt: skip


def test_calls_of_one_client_share_one_connection(endpoint: tuple[Any, str]) -> None:
    server, url = endpoint
    dynamodb = client("dynamodb", url)
    dynamodb.create_table(
        TableName="t", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip
    seen: set[tuple[str, int]] = set()
    for n in range(20):
        dynamodb.put_item(TableName="t", Item={"k": {"S": str(n)}})
        assert dynamodb.get_item(TableName="t", Key={"k": {"S": str(n)}})["Item"] == {"k": {"S": str(n)}}
        seen.update(c.getpeername() for c in server._server.open_connections)
    assert len(seen) == 1  # one client socket, from the first call to the last
    assert len(server._server.open_connections) == 1


def test_a_request_body_left_unread_does_not_become_the_next_request(endpoint: tuple[Any, str]) -> None:
    server, _ = endpoint
    host, port = server.get_host_and_port()
    connection = http.client.HTTPConnection(host, port, timeout=10)
    connection.request("GET", "/moto-api/reset-auth", body=b"x" * 100_000)  # a body no route reads
    first = connection.getresponse()
    first.read()
    connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
    second = connection.getresponse()
    assert second.status == 200 and second.read().startswith(b'{"TableNames"')
    assert not second.will_close


def test_stopping_the_endpoint_closes_kept_connections() -> None:
    port = free_port()
    server = start_moto(port)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
    answer = connection.getresponse()
    answer.read()
    assert not answer.will_close and connection.sock is not None
    server.stop()
    assert connection.sock.recv(1) == b""  # the server's end is closed: end of stream, at once
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # and nothing listens any more
