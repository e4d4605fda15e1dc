"""`skyless check`: with no credentials at all it says what to set for each cloud; with moto's AWS and
credential files in a temporary HOME it reports each cloud usable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()
CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CONFIG",
    "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_SUBSCRIPTION_ID",
    "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_CONFIG_DIR",
    "LAMBDA_API_KEY", "RUNPOD_API_KEY",
)  # fmt: skip


@pytest.fixture
def bare_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with nothing in it and no credential in the environment."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / ".aws" / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / ".aws" / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # not on EC2: don't wait for its metadata
    return home


def check_json(*args: str) -> dict[str, dict[str, Any]]:
    result = runner.invoke(app, ["check", "--json", *args])
    assert result.exit_code == 0, result.output
    return {entry["cloud"]: entry for entry in json.loads(result.stdout)}


def test_without_credentials_every_cloud_but_local_says_what_to_set(bare_home: Path) -> None:
    checks = check_json()
    assert set(checks) == {"aws", "gcp", "azure", "lambda", "runpod", "local"}
    assert checks["local"]["status"] == "ok" and checks["local"]["usable"]
    for cloud in ("aws", "gcp", "azure", "lambda", "runpod"):
        assert checks[cloud]["status"] == "missing" and not checks[cloud]["usable"], cloud
    assert "AWS_ACCESS_KEY_ID" in checks["aws"]["fix"] and "aws configure" in checks["aws"]["fix"]
    assert "gcloud auth application-default login" in checks["gcp"]["fix"]
    assert "GOOGLE_APPLICATION_CREDENTIALS" in checks["gcp"]["fix"]
    assert "az login" in checks["azure"]["fix"] and "AZURE_CLIENT_SECRET" in checks["azure"]["fix"]
    assert "LAMBDA_API_KEY" in checks["lambda"]["fix"] and "lambda_keys" in checks["lambda"]["fix"]
    assert "RUNPOD_API_KEY" in checks["runpod"]["fix"] and "config.toml" in checks["runpod"]["fix"]
    assert str(bare_home / ".lambda_cloud" / "lambda_keys") in checks["lambda"]["detail"]


def test_the_table_lists_each_cloud_and_the_fixes(bare_home: Path) -> None:
    result = runner.invoke(app, ["check"])
    assert result.exit_code == 0
    for cloud in ("aws", "gcp", "azure", "lambda", "runpod", "local"):
        assert cloud in result.stdout
    assert "aws configure" in result.stdout
    assert "Enabled: local" in result.stdout


def test_with_moto_aws_and_credential_files_every_cloud_is_usable(
    bare_home: Path, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    gcloud = bare_home / ".config" / "gcloud"
    gcloud.mkdir(parents=True)
    adc = {"type": "authorized_user", "client_id": "x", "refresh_token": "y", "quota_project_id": "proj-1"}
    (gcloud / "application_default_credentials.json").write_text(json.dumps(adc))
    azure = bare_home / ".azure"
    azure.mkdir()
    profile = {"subscriptions": [{"id": "sub-1", "name": "Research", "isDefault": True}]}
    (azure / "azureProfile.json").write_text("\ufeff" + json.dumps(profile))  # az writes a BOM
    (bare_home / ".lambda_cloud").mkdir()
    (bare_home / ".lambda_cloud" / "lambda_keys").write_text("api_key = secret_abc\n")
    (bare_home / ".runpod").mkdir()
    (bare_home / ".runpod" / "config.toml").write_text('[default]\napi_key = "rp_123"\n')

    checks = check_json()
    assert checks["aws"]["status"] == "ok"
    assert "account 123456789012" in checks["aws"]["detail"] and moto_endpoint in checks["aws"]["detail"]
    assert checks["gcp"]["status"] == "found" and "project proj-1" in checks["gcp"]["detail"]
    assert checks["azure"]["status"] == "found" and "sub-1" in checks["azure"]["detail"]
    assert checks["lambda"]["status"] == "found" and checks["runpod"]["status"] == "found"
    assert all(c["usable"] and c["fix"] == "" for c in checks.values())
    assert "secret_abc" not in json.dumps(checks) and "rp_123" not in json.dumps(checks)


def test_refused_aws_keys_and_broken_files_are_told_apart_from_missing_ones(
    bare_home: Path, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_PROFILE", "nonexistent")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(bare_home / "key.json"))
    monkeypatch.setenv("AZURE_CLIENT_ID", "app-1")
    monkeypatch.setenv("AZURE_TENANT_ID", "tenant-1")
    (bare_home / ".runpod").mkdir()
    (bare_home / ".runpod" / "config.toml").write_text("api_key = [unclosed\n")
    checks = check_json("aws", "gcp", "azure", "runpod")
    assert list(checks) == ["aws", "gcp", "azure", "runpod"]
    assert checks["aws"]["status"] == "refused" and "nonexistent" in checks["aws"]["detail"]
    assert checks["gcp"]["status"] == "refused" and "does not exist" in checks["gcp"]["detail"]
    assert checks["azure"]["status"] == "refused"
    assert "AZURE_CLIENT_SECRET, AZURE_SUBSCRIPTION_ID not set" in checks["azure"]["detail"]
    assert checks["runpod"]["status"] == "refused" and "not valid TOML" in checks["runpod"]["detail"]


def test_a_service_principal_in_the_environment_is_enough_for_azure(
    bare_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"AZURE_CLIENT_ID": "app-1", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_SECRET": "s",
                        "AZURE_SUBSCRIPTION_ID": "sub"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    assert check_json("azure")["azure"]["status"] == "found"


def test_an_unknown_cloud_is_a_user_error_with_the_choices(bare_home: Path) -> None:
    result = runner.invoke(app, ["check", "awss"])
    assert result.exit_code == 2
    assert "unknown cloud 'awss'" in result.stderr and "aws, gcp, azure" in result.stderr
