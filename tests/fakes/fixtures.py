"""pytest fixtures: each starts one fake cloud on a free port, points the provider's environment at it
(so `<Provider>.from_env()` and the registry talk to it) and stops it afterwards.

Use from a test module with `pytest_plugins = ["fakes.fixtures"]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.azure import CLIENT_ID, CLIENT_SECRET, TENANT, FakeAzure, start_fake_azure
from fakes.gcp import FakeGcp, start_fake_gcp
from fakes.lambda_cloud import FakeLambdaCloud, start_fake_lambda
from fakes.runpod import FakeRunPod, start_fake_runpod
from shared.config.env_names import (
    ENV_AZURE_ARM_URL,
    ENV_AZURE_AUTHORITY_HOST,
    ENV_AZURE_CLIENT_ID,
    ENV_AZURE_CLIENT_SECRET,
    ENV_AZURE_POLL_SECONDS,
    ENV_AZURE_RESOURCE_GROUP,
    ENV_AZURE_SSH_PUBLIC_KEY,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TENANT_ID,
    ENV_CLOUDSDK_CORE_PROJECT,
    ENV_GCP_COMPUTE_URL,
    ENV_GCP_POLL_SECONDS,
    ENV_GCP_TPU_URL,
    ENV_GOOGLE_APPLICATION_CREDENTIALS,
    ENV_GOOGLE_CLOUD_PROJECT,
    ENV_GOOGLE_OAUTH_ACCESS_TOKEN,
    ENV_LAMBDA_API_KEY,
    ENV_LAMBDA_API_URL,
    ENV_LAMBDA_SSH_KEY_NAME,
    ENV_RUNPOD_API_KEY,
    ENV_RUNPOD_API_URL,
)


@pytest.fixture
def fake_lambda(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLambdaCloud]:
    fake, server = start_fake_lambda()
    monkeypatch.setenv(ENV_LAMBDA_API_KEY, fake.api_key)
    monkeypatch.setenv(ENV_LAMBDA_API_URL, fake.url)
    monkeypatch.delenv(ENV_LAMBDA_SSH_KEY_NAME, raising=False)
    try:
        yield fake
    finally:
        server.stop()


@pytest.fixture
def fake_gcp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeGcp]:
    """Credentials are a real service-account key file whose token_uri is the fake's /token."""
    fake, server = start_fake_gcp()
    key_file = tmp_path / "gcp-service-account.json"
    key_file.write_text(json.dumps(fake.service_account_info()))
    monkeypatch.setenv(ENV_GOOGLE_APPLICATION_CREDENTIALS, str(key_file))
    monkeypatch.setenv(ENV_GOOGLE_CLOUD_PROJECT, fake.project)
    monkeypatch.setenv(ENV_GCP_COMPUTE_URL, f"{fake.url}/compute/v1")
    monkeypatch.setenv(ENV_GCP_TPU_URL, f"{fake.url}/tpu/v2")
    monkeypatch.setenv(ENV_GCP_POLL_SECONDS, "0.01")
    monkeypatch.delenv(ENV_GOOGLE_OAUTH_ACCESS_TOKEN, raising=False)
    monkeypatch.delenv(ENV_CLOUDSDK_CORE_PROJECT, raising=False)
    try:
        yield fake
    finally:
        server.stop()


@pytest.fixture
def fake_runpod(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRunPod]:
    fake, server = start_fake_runpod()
    monkeypatch.setenv(ENV_RUNPOD_API_KEY, fake.api_key)
    monkeypatch.setenv(ENV_RUNPOD_API_URL, fake.url)
    try:
        yield fake
    finally:
        server.stop()


@pytest.fixture
def fake_azure(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAzure]:
    fake, server = start_fake_azure()
    monkeypatch.setenv(ENV_AZURE_TENANT_ID, TENANT)
    monkeypatch.setenv(ENV_AZURE_CLIENT_ID, CLIENT_ID)
    monkeypatch.setenv(ENV_AZURE_CLIENT_SECRET, CLIENT_SECRET)
    monkeypatch.setenv(ENV_AZURE_SUBSCRIPTION_ID, fake.subscription)
    monkeypatch.setenv(ENV_AZURE_AUTHORITY_HOST, fake.url)
    monkeypatch.setenv(ENV_AZURE_ARM_URL, fake.url)
    monkeypatch.setenv(ENV_AZURE_POLL_SECONDS, "0.01")
    monkeypatch.setenv(ENV_AZURE_SSH_PUBLIC_KEY, "ssh-ed25519 AAAAFake skyless-test")
    monkeypatch.delenv(ENV_AZURE_RESOURCE_GROUP, raising=False)
    try:
        yield fake
    finally:
        server.stop()
