"""pytest fixtures: each starts one fake cloud on a free port, points the provider's environment at it
(so `<Provider>.from_env()` and the registry talk to it) and stops it afterwards.

Use from a test module with `pytest_plugins = ["fakes.fixtures"]`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.lambda_cloud import FakeLambdaCloud, start_fake_lambda


@pytest.fixture
def fake_lambda(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLambdaCloud]:
    fake, server = start_fake_lambda()
    monkeypatch.setenv("LAMBDA_API_KEY", fake.api_key)
    monkeypatch.setenv("SKYLESS_LAMBDA_API_URL", fake.url)
    monkeypatch.delenv("SKYLESS_LAMBDA_SSH_KEY_NAME", raising=False)
    try:
        yield fake
    finally:
        server.stop()
