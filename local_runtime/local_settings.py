"""The Settings and AWS clients of the local runtime, for the daemon and for the processes that talk to it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3

from shared.config import Settings
from shared.config.env_names import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_REGION,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_PREFIX,
)

FAKE_AWS_ENV = {
    ENV_AWS_ACCESS_KEY_ID: "skyless-local",
    ENV_AWS_SECRET_ACCESS_KEY: "skyless-local",
    ENV_AWS_DEFAULT_REGION: "us-east-1",
    ENV_AWS_REGION: "us-east-1",
}


def local_settings(home: Path, moto_port: int, api_port: int) -> Settings:
    """The Settings of the local runtime: every cloud served by the `local` provider, and webhooks may
    be on this machine (the only place loopback webhooks are allowed)."""
    return Settings.from_env().with_(
        prefix=os.environ.get(ENV_PREFIX, "skyless"),
        region=FAKE_AWS_ENV[ENV_AWS_DEFAULT_REGION],
        endpoint_url=f"http://127.0.0.1:{moto_port}",
        home=home,
        providers="*=local",
        api_url=f"http://127.0.0.1:{api_port}",
        allow_loopback_webhooks=True,
    )


def local_client(service: str, settings: Settings) -> Any:
    """A boto3 client of the local endpoint, with the local runtime's fake credentials."""
    return boto3.client(
        service,
        region_name=settings.region,
        endpoint_url=settings.endpoint_url,
        aws_access_key_id=FAKE_AWS_ENV[ENV_AWS_ACCESS_KEY_ID],
        aws_secret_access_key=FAKE_AWS_ENV[ENV_AWS_SECRET_ACCESS_KEY],
    )
