"""The key node credentials are signed with: Secrets Manager in AWS (read once per warm container), a file
readable by its owner alone on the local runtime, and never a file in a Lambda's home."""

from __future__ import annotations

import stat
import uuid
from pathlib import Path

import boto3
import pytest

from shared.config import Settings
from shared.jobs import tokens


@pytest.fixture
def no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SKYLESS_AGENT_SECRET", "SKYLESS_AGENT_SECRET_ARN", "AWS_LAMBDA_FUNCTION_NAME"):
        monkeypatch.delenv(name, raising=False)


def test_in_aws_the_key_is_the_stacks_secret_read_once_per_container(
    stack: Settings, no_key_in_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = boto3.client("secretsmanager", endpoint_url=stack.endpoint_url, region_name=stack.region)
    arn = secrets.create_secret(Name=f"{stack.prefix}/agent-token-key", SecretString="k" * 64)["ARN"]
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "skyless-ProvisionFunction")
    monkeypatch.setenv("SKYLESS_AGENT_SECRET_ARN", arn)

    first = tokens.agent_token(stack, "job-1", 0)
    secrets.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)  # a warm container asks no more

    assert tokens.agent_token(stack, "job-1", 0) == first
    assert tokens.control_plane_secret(stack) == b"k" * 64
    assert not (stack.local_dir / "agent-secret").exists()


def test_a_lambda_without_the_secret_refuses_instead_of_writing_a_file(
    stack: Settings, no_key_in_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "skyless-ApiFunction")

    with pytest.raises(tokens.MissingSecretError, match="SKYLESS_AGENT_SECRET_ARN"):
        tokens.boot_token(stack, "job-1", 0)
    assert not (stack.local_dir / "agent-secret").exists()


def test_the_local_runtime_keeps_its_key_in_a_file_only_its_owner_can_read(
    tmp_path: Path, no_key_in_env: None
) -> None:
    settings = Settings(prefix=f"t{uuid.uuid4().hex[:8]}", home=tmp_path / "home")

    token = tokens.agent_token(settings, "job-1", 0)

    key_file = settings.local_dir / "agent-secret"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert tokens.agent_token(settings, "job-1", 0) == token  # the same key on every read
    assert tokens.check_boot_token(settings, "job-1", 0, tokens.boot_token(settings, "job-1", 0))
