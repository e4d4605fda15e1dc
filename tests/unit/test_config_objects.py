"""Each config object of shared/config/ parses its variables: the values given, the defaults when they
are unset, and a ConfigError naming the variable when a value cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config import ConfigError, Settings
from shared.config import env_names as names
from shared.config.catalog import CatalogConfig, PriceSourcesConfig
from shared.config.channels import NotifyConfig, StorageConfig, UploadConfig
from shared.config.clouds import (
    AwsConfig,
    AzureConfig,
    GcpConfig,
    LambdaConfig,
    LocalCloudConfig,
    RunPodConfig,
)
from shared.config.control_plane import (
    DashboardConfig,
    NodeCredentialsConfig,
    ReaperConfig,
    pydantic_plugins_off,
)


def test_settings_parse_their_variables() -> None:
    settings = Settings.from_env(
        {
            names.ENV_PREFIX: "p1",
            names.ENV_AWS_REGION: "eu-west-1",
            names.ENV_AWS_DEFAULT_REGION: "us-west-2",
            names.ENV_AWS_ENDPOINT_URL: "http://127.0.0.1:5000",
            names.ENV_HOME: "/tmp/sk",
            names.ENV_PROVIDERS: "aws=aws",
            names.ENV_API_URL: "https://api.example",
            names.ENV_HEARTBEAT_SECONDS: "3",
            names.ENV_CRASH_LOOP_LIMIT: "2",
            names.ENV_CLUSTER_POLL_SECONDS: "0.5",
            names.ENV_ALLOW_LOOPBACK_WEBHOOKS: "1",
        }
    )
    assert (settings.prefix, settings.region, settings.endpoint_url) == (
        "p1",
        "eu-west-1",
        "http://127.0.0.1:5000",
    )
    assert (settings.home, settings.providers, settings.api_url) == (
        Path("/tmp/sk"),
        "aws=aws",
        "https://api.example",
    )
    assert (settings.heartbeat_seconds, settings.crash_loop_limit) == (3, 2)
    assert settings.cluster_poll_seconds == 0.5 and settings.allow_loopback_webhooks is True


def test_settings_defaults_when_nothing_is_set() -> None:
    settings = Settings.from_env({})
    assert settings.prefix == "skyless" and settings.region == "us-east-1" and settings.endpoint_url is None
    assert settings.home == Path.home() / ".skyless" and settings.providers == "*=local"
    assert (settings.heartbeat_seconds, settings.silent_after_seconds, settings.max_wait_retries) == (
        10,
        60,
        8,
    )
    assert settings.autostop_minute_seconds == 60.0 and settings.allow_loopback_webhooks is False
    assert Settings.from_env({names.ENV_AWS_DEFAULT_REGION: "ap-south-1"}).region == "ap-south-1"


def test_settings_round_trip_through_their_environment() -> None:
    settings = Settings(prefix="rt", endpoint_url="http://e", api_url="http://a", crash_loop_limit=4)
    assert Settings.from_env(settings.to_env()) == settings


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (names.ENV_HEARTBEAT_SECONDS, "ten"),
        (names.ENV_CRASH_LOOP_LIMIT, "1.5"),
        (names.ENV_CLUSTER_POLL_SECONDS, "fast"),
        (names.ENV_AUTOSTOP_MINUTE_SECONDS, "1m"),
    ],
)
def test_a_bad_settings_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}='{value}'") as raised:
        Settings.from_env({name: value})
    assert raised.value.name == name
    assert isinstance(raised.value, ValueError)  # callers that caught int()'s ValueError still do


def test_node_credentials_config() -> None:
    assert NodeCredentialsConfig.from_env({}) == NodeCredentialsConfig(None, None, False, 1800)
    config = NodeCredentialsConfig.from_env(
        {
            names.ENV_AGENT_SECRET: "k",
            names.ENV_AGENT_SECRET_ARN: "arn:aws:secretsmanager:x",
            names.ENV_LAMBDA_FUNCTION_NAME: "skyless-api",
            names.ENV_BOOT_WINDOW_SECONDS: "60",
        }
    )
    assert config == NodeCredentialsConfig("k", "arn:aws:secretsmanager:x", True, 60)
    assert NodeCredentialsConfig.from_env({names.ENV_AGENT_SECRET: ""}).agent_secret is None
    with pytest.raises(ConfigError, match=names.ENV_BOOT_WINDOW_SECONDS):
        NodeCredentialsConfig.from_env({names.ENV_BOOT_WINDOW_SECONDS: "half an hour"})


def test_reaper_and_dashboard_config() -> None:
    assert ReaperConfig.from_env({}).grace_seconds == 300
    assert ReaperConfig.from_env({names.ENV_REAPER_GRACE_SECONDS: "5"}).grace_seconds == 5
    with pytest.raises(ConfigError, match=names.ENV_REAPER_GRACE_SECONDS):
        ReaperConfig.from_env({names.ENV_REAPER_GRACE_SECONDS: "-"})
    assert DashboardConfig.from_env({}) == DashboardConfig(4 * 3600, None)
    assert DashboardConfig.from_env({names.ENV_SESSION_SECONDS: "60", names.ENV_SESSION_SECRET: "s"}) == (
        DashboardConfig(60, "s")
    )
    with pytest.raises(ConfigError, match=names.ENV_SESSION_SECONDS):
        DashboardConfig.from_env({names.ENV_SESSION_SECONDS: "1h"})


def test_pydantic_plugins_are_off_only_for_the_documented_values() -> None:
    assert [
        pydantic_plugins_off({names.ENV_PYDANTIC_DISABLE_PLUGINS: v}) for v in ("1", "true", "__all__")
    ] == [True] * 3
    assert not pydantic_plugins_off({}) and not pydantic_plugins_off(
        {names.ENV_PYDANTIC_DISABLE_PLUGINS: "0"}
    )


def test_catalog_config() -> None:
    assert CatalogConfig.from_env({}) == CatalogConfig(Path.home() / ".skyless", 60.0)
    config = CatalogConfig.from_env({names.ENV_HOME: "/h", names.ENV_CATALOG_TTL_SECONDS: "0.25"})
    assert config == CatalogConfig(Path("/h"), 0.25)
    with pytest.raises(ConfigError, match=names.ENV_CATALOG_TTL_SECONDS):
        CatalogConfig.from_env({names.ENV_CATALOG_TTL_SECONDS: "a minute"})


def test_price_sources_config() -> None:
    assert PriceSourcesConfig.from_env({}) == PriceSourcesConfig()
    config = PriceSourcesConfig.from_env(
        {
            names.ENV_PRICE_CLOUDS: " AWS, lambda ,,",
            names.ENV_GCP_PRICING_KEY: "g",
            names.ENV_LAMBDA_API_KEY: "",
            names.ENV_RUNPOD_API_KEY: "r",
            names.ENV_AZURE_PRICES_URL: "http://az",
            names.ENV_RUNPOD_API_URL: "http://rp",
        }
    )
    assert config.clouds == ("aws", "lambda")
    assert (config.gcp_pricing_key, config.lambda_api_key, config.runpod_api_key) == ("g", None, "r")
    assert (config.azure_prices_url, config.runpod_api_url, config.aws_pricing_url) == (
        "http://az",
        "http://rp",
        None,
    )


def test_notify_config() -> None:
    assert NotifyConfig.from_env({}) == NotifyConfig("skyless@example.com", 1.0)
    config = NotifyConfig.from_env({names.ENV_NOTIFY_FROM: "ops@x.io", names.ENV_NOTIFY_BACKOFF_SECONDS: "0"})
    assert config == NotifyConfig("ops@x.io", 0.0)
    with pytest.raises(ConfigError, match=names.ENV_NOTIFY_BACKOFF_SECONDS):
        NotifyConfig.from_env({names.ENV_NOTIFY_BACKOFF_SECONDS: "soon"})


def test_upload_owner_default_and_the_empty_value_of_the_template() -> None:
    assert UploadConfig.from_env({}).default_owner == "u-local"
    assert UploadConfig.from_env({names.ENV_UPLOAD_OWNER: "u-9"}).default_owner == "u-9"
    assert UploadConfig.from_env({names.ENV_UPLOAD_OWNER: ""}).default_owner is None


def test_storage_config() -> None:
    assert StorageConfig.from_env({}) == StorageConfig()
    config = StorageConfig.from_env(
        {
            names.ENV_STORES: "s3=aws,r2=r2",
            names.ENV_STORAGE_CREDENTIAL_SECONDS: "900",
            names.ENV_S3_ENDPOINT: "",
            names.ENV_R2_ACCOUNT_ID: "acct",
            names.ENV_R2_ACCESS_KEY_ID: "ak",
            names.ENV_CLOUDFLARE_API_URL: "http://cf",
        }
    )
    assert (config.stores, config.credential_seconds, config.s3_endpoint) == ("s3=aws,r2=r2", 900, None)
    assert (config.r2_account_id, config.r2_access_key_id, config.cloudflare_api_url) == (
        "acct",
        "ak",
        "http://cf",
    )
    assert StorageConfig.from_env({names.ENV_STORES: ""}).stores == ""  # set empty: no store at all
    with pytest.raises(ConfigError, match=names.ENV_STORAGE_CREDENTIAL_SECONDS):
        StorageConfig.from_env({names.ENV_STORAGE_CREDENTIAL_SECONDS: "1h"})


def test_aws_config_follows_the_stack_unless_told() -> None:
    settings = Settings(region="eu-west-1", endpoint_url="http://moto")
    assert AwsConfig.from_env(settings, {}) == AwsConfig((), "eu-west-1", "http://moto", None, "ubuntu", 256)
    config = AwsConfig.from_env(
        settings,
        {
            names.ENV_AWS_EC2_ENDPOINT: "aws",
            names.ENV_AWS_REGIONS: "us-east-1, us-west-2",
            names.ENV_AWS_INSTANCE_PROFILE: "nodes",
            names.ENV_AWS_RUN_AS: "ec2-user",
            names.ENV_AWS_DISK_GB: "100",
        },
    )
    assert config == AwsConfig(("us-east-1", "us-west-2"), "eu-west-1", None, "nodes", "ec2-user", 100)
    with pytest.raises(ConfigError, match=names.ENV_AWS_DISK_GB):
        AwsConfig.from_env(settings, {names.ENV_AWS_DISK_GB: "lots"})


def test_gcp_config() -> None:
    assert GcpConfig.from_env({}) == GcpConfig()
    config = GcpConfig.from_env(
        {
            names.ENV_GOOGLE_OAUTH_ACCESS_TOKEN: "t",
            names.ENV_GOOGLE_APPLICATION_CREDENTIALS: "/k.json",
            names.ENV_CLOUDSDK_CONFIG: "/g",
            names.ENV_CLOUDSDK_CORE_PROJECT: "from-sdk",
            names.ENV_GCP_COMPUTE_URL: "http://c",
            names.ENV_GCP_NETWORK: "global/networks/x",
            names.ENV_GCP_POLL_SECONDS: "0.01",
        }
    )
    assert config == GcpConfig(
        "t", "/k.json", Path("/g"), "from-sdk", "http://c", None, "global/networks/x", 0.01
    )
    both = {names.ENV_GOOGLE_CLOUD_PROJECT: "first", names.ENV_CLOUDSDK_CORE_PROJECT: "second"}
    assert GcpConfig.from_env(both).project == "first"
    with pytest.raises(ConfigError, match=names.ENV_GCP_POLL_SECONDS):
        GcpConfig.from_env({names.ENV_GCP_POLL_SECONDS: "often"})


def test_azure_config() -> None:
    assert AzureConfig.from_env({}) == AzureConfig()
    config = AzureConfig.from_env(
        {
            names.ENV_AZURE_TENANT_ID: "t",
            names.ENV_AZURE_CLIENT_ID: "c",
            names.ENV_AZURE_CLIENT_SECRET: "s",
            names.ENV_AZURE_AUTHORITY_HOST: "http://login/",
            names.ENV_AZURE_SUBSCRIPTION_ID: "sub",
            names.ENV_AZURE_CONFIG_DIR: "/az",
            names.ENV_AZURE_ARM_URL: "http://arm",
            names.ENV_AZURE_POLL_SECONDS: "0.01",
            names.ENV_AZURE_RESOURCE_GROUP: "rg",
            names.ENV_AZURE_SSH_PUBLIC_KEY: "ssh-ed25519 AAAA",
        }
    )
    assert config == AzureConfig(
        "t", "c", "s", "http://login/", "sub", Path("/az"), "http://arm", 0.01, "rg", "ssh-ed25519 AAAA"
    )
    with pytest.raises(ConfigError, match=names.ENV_AZURE_POLL_SECONDS):
        AzureConfig.from_env({names.ENV_AZURE_POLL_SECONDS: "3s"})


def test_lambda_and_runpod_config() -> None:
    assert LambdaConfig.from_env({}) == LambdaConfig() and RunPodConfig.from_env({}) == RunPodConfig()
    assert LambdaConfig.from_env(
        {
            names.ENV_LAMBDA_API_KEY: "k",
            names.ENV_LAMBDA_API_URL: "http://l",
            names.ENV_LAMBDA_SSH_KEY_NAME: "me",
        }
    ) == LambdaConfig("k", "http://l", "me")
    assert RunPodConfig.from_env({names.ENV_RUNPOD_API_KEY: "k", names.ENV_RUNPOD_API_URL: "http://r"}) == (
        RunPodConfig("k", "http://r")
    )
    assert (
        RunPodConfig.from_env({names.ENV_RUNPOD_API_KEY: ""}).api_key is None
    )  # empty: fall back to the file


def test_local_cloud_config() -> None:
    assert LocalCloudConfig.from_env({}) == LocalCloudConfig()
    config = LocalCloudConfig.from_env(
        {
            names.ENV_LOCAL_AGENT_COMMAND: '["python", "-m", "stand_in"]',
            names.ENV_LOCAL_CAPACITY: '{"no_capacity": []}',
        }
    )
    assert config == LocalCloudConfig(("python", "-m", "stand_in"), '{"no_capacity": []}')
    for bad in ("python -m x", "[]", '{"a": 1}', "[1, 2]"):
        with pytest.raises(ConfigError, match=f"{names.ENV_LOCAL_AGENT_COMMAND}=.*a JSON list of strings"):
            LocalCloudConfig.from_env({names.ENV_LOCAL_AGENT_COMMAND: bad})
