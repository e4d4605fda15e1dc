"""Shared fixtures: one moto server (real HTTP) per session, and a fresh stack per test."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from shared.config import Settings
from shared.stack import create_stack

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
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    saved = {name: os.environ.get(name) for name in [*FAKE_AWS_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(FAKE_AWS_ENV)
    os.environ["AWS_ENDPOINT_URL"] = url
    try:
        yield url
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def stack(moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Fresh tables/queues/bucket under a unique prefix; the environment is set so handlers see them."""
    settings = Settings(
        prefix=f"t{uuid.uuid4().hex[:10]}",
        region=FAKE_AWS_ENV["AWS_DEFAULT_REGION"],
        endpoint_url=moto_endpoint,
        home=tmp_path / "skyless-home",
        providers="*=local",
        api_url="http://127.0.0.1:9",  # nothing listens: tests that need the API start their own
    )
    settings.home.mkdir(parents=True, exist_ok=True)
    create_stack(settings)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return settings
