"""Each cloud's credentials and endpoints as the environment gives them. Files a cloud's own tools keep
(`~/.lambda_cloud/lambda_keys`, `~/.runpod/config.toml`, gcloud's and az's folders) are read by the
provider, from the paths named here; an endpoint left None is the provider's public default."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shared.config.env_names import (
    ENV_AWS_DISK_GB,
    ENV_AWS_EC2_ENDPOINT,
    ENV_AWS_INSTANCE_PROFILE,
    ENV_AWS_REGIONS,
    ENV_AWS_RUN_AS,
    ENV_AZURE_ARM_URL,
    ENV_AZURE_AUTHORITY_HOST,
    ENV_AZURE_CLIENT_ID,
    ENV_AZURE_CLIENT_SECRET,
    ENV_AZURE_CONFIG_DIR,
    ENV_AZURE_POLL_SECONDS,
    ENV_AZURE_RESOURCE_GROUP,
    ENV_AZURE_SSH_PUBLIC_KEY,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TENANT_ID,
    ENV_CLOUDSDK_CONFIG,
    ENV_CLOUDSDK_CORE_PROJECT,
    ENV_GCP_COMPUTE_URL,
    ENV_GCP_NETWORK,
    ENV_GCP_POLL_SECONDS,
    ENV_GCP_TPU_URL,
    ENV_GOOGLE_APPLICATION_CREDENTIALS,
    ENV_GOOGLE_CLOUD_PROJECT,
    ENV_GOOGLE_OAUTH_ACCESS_TOKEN,
    ENV_LAMBDA_API_KEY,
    ENV_LAMBDA_API_URL,
    ENV_LAMBDA_SSH_KEY_NAME,
    ENV_LOCAL_AGENT_COMMAND,
    ENV_LOCAL_CAPACITY,
    ENV_RUNPOD_API_KEY,
    ENV_RUNPOD_API_URL,
)
from shared.config.environment import ConfigError, env_float, env_int, env_list, env_text, process_environ
from shared.config.settings import Settings

DEFAULT_AWS_DISK_GB = 256


@dataclass(frozen=True)
class AwsConfig:
    regions: tuple[str, ...] = ()  # empty: ask EC2 which regions are enabled
    home_region: str = "us-east-1"
    endpoint_url: str | None = None
    instance_profile: str | None = None
    run_as: str = "ubuntu"
    default_disk_gb: int = DEFAULT_AWS_DISK_GB

    @classmethod
    def from_env(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> AwsConfig:
        """EC2 follows the stack's endpoint unless `SKYLESS_AWS_EC2_ENDPOINT` says otherwise (`aws`: the
        real one, also when the stack's tables live elsewhere)."""
        env = process_environ(environ)
        endpoint = env.get(ENV_AWS_EC2_ENDPOINT, settings.endpoint_url or "") or None
        return cls(
            regions=env_list(env, ENV_AWS_REGIONS),
            home_region=settings.region,
            endpoint_url=None if endpoint == "aws" else endpoint,
            instance_profile=env_text(env, ENV_AWS_INSTANCE_PROFILE),
            run_as=env.get(ENV_AWS_RUN_AS, "ubuntu"),
            default_disk_gb=env_int(env, ENV_AWS_DISK_GB, DEFAULT_AWS_DISK_GB),
        )


@dataclass(frozen=True)
class GcpConfig:
    access_token: str | None = None  # a ready OAuth token: used as is
    credentials_file: str | None = None  # a service-account key or authorized_user file
    gcloud_dir: Path | None = None  # gcloud's folder, with its default credentials; None: ~/.config/gcloud
    project: str | None = None  # None: the key file's project
    compute_url: str | None = None
    tpu_url: str | None = None
    network: str = "global/networks/default"
    poll_seconds: float = 2.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GcpConfig:
        env = process_environ(environ)
        gcloud = env_text(env, ENV_CLOUDSDK_CONFIG)
        return cls(
            access_token=env_text(env, ENV_GOOGLE_OAUTH_ACCESS_TOKEN),
            credentials_file=env_text(env, ENV_GOOGLE_APPLICATION_CREDENTIALS),
            gcloud_dir=Path(gcloud) if gcloud else None,
            project=env_text(env, ENV_GOOGLE_CLOUD_PROJECT) or env_text(env, ENV_CLOUDSDK_CORE_PROJECT),
            compute_url=env_text(env, ENV_GCP_COMPUTE_URL),
            tpu_url=env_text(env, ENV_GCP_TPU_URL),
            network=env.get(ENV_GCP_NETWORK, cls.network),
            poll_seconds=env_float(env, ENV_GCP_POLL_SECONDS, cls.poll_seconds),
        )


@dataclass(frozen=True)
class AzureConfig:
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    authority: str | None = None  # None: the public cloud's login host
    subscription_id: str | None = None  # None: az's default subscription
    config_dir: Path | None = None  # az's folder; None: ~/.azure
    arm_url: str | None = None
    poll_seconds: float = 3.0
    resource_group: str | None = None  # None: one group per region
    ssh_public_key: str | None = None  # None: ~/.ssh's, else a throwaway key

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AzureConfig:
        env = process_environ(environ)
        folder = env_text(env, ENV_AZURE_CONFIG_DIR)
        return cls(
            tenant_id=env.get(ENV_AZURE_TENANT_ID),
            client_id=env.get(ENV_AZURE_CLIENT_ID),
            client_secret=env.get(ENV_AZURE_CLIENT_SECRET),
            authority=env_text(env, ENV_AZURE_AUTHORITY_HOST),
            subscription_id=env_text(env, ENV_AZURE_SUBSCRIPTION_ID),
            config_dir=Path(folder) if folder else None,
            arm_url=env_text(env, ENV_AZURE_ARM_URL),
            poll_seconds=env_float(env, ENV_AZURE_POLL_SECONDS, cls.poll_seconds),
            resource_group=env.get(ENV_AZURE_RESOURCE_GROUP),
            ssh_public_key=env_text(env, ENV_AZURE_SSH_PUBLIC_KEY),
        )


@dataclass(frozen=True)
class LambdaConfig:
    api_key: str | None = None  # None: ~/.lambda_cloud/lambda_keys
    api_url: str | None = None
    ssh_key_name: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LambdaConfig:
        env = process_environ(environ)
        return cls(
            api_key=env_text(env, ENV_LAMBDA_API_KEY),
            api_url=env_text(env, ENV_LAMBDA_API_URL),
            ssh_key_name=env.get(ENV_LAMBDA_SSH_KEY_NAME),
        )


@dataclass(frozen=True)
class RunPodConfig:
    api_key: str | None = None  # None: ~/.runpod/config.toml
    api_url: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunPodConfig:
        env = process_environ(environ)
        return cls(api_key=env_text(env, ENV_RUNPOD_API_KEY), api_url=env_text(env, ENV_RUNPOD_API_URL))


@dataclass(frozen=True)
class LocalCloudConfig:
    agent_command: tuple[str, ...] | None = None  # a stand-in for the node agent (tests)
    capacity: str | None = None  # JSON fault rules; None: the runtime's capacity.json

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LocalCloudConfig:
        env = process_environ(environ)
        raw = env_text(env, ENV_LOCAL_AGENT_COMMAND)
        command: tuple[str, ...] | None = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            if not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed) or not parsed:
                raise ConfigError(ENV_LOCAL_AGENT_COMMAND, raw, "a JSON list of strings")
            command = tuple(parsed)
        return cls(agent_command=command, capacity=env_text(env, ENV_LOCAL_CAPACITY))
