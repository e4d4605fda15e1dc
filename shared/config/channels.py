"""Config of the channels beside the job lifecycle: notifications, uploaded task files, storage buckets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.config.env_names import (
    ENV_AZURE_BLOB_ENDPOINT,
    ENV_AZURE_STORAGE_ACCOUNT,
    ENV_AZURE_STORAGE_KEY,
    ENV_CHECKPOINT_EXPIRE_DAYS,
    ENV_CHECKPOINT_KEEP_LAST,
    ENV_CLOUDFLARE_API_URL,
    ENV_GCS_ENDPOINT,
    ENV_GCS_STS_URL,
    ENV_NOTIFY_BACKOFF_SECONDS,
    ENV_NOTIFY_FROM,
    ENV_R2_ACCESS_KEY_ID,
    ENV_R2_ACCOUNT_ID,
    ENV_R2_API_TOKEN,
    ENV_R2_ENDPOINT,
    ENV_R2_SECRET_ACCESS_KEY,
    ENV_S3_ENDPOINT,
    ENV_STORAGE_BUCKETS,
    ENV_STORAGE_CREDENTIAL_SECONDS,
    ENV_STORAGE_ROLE_ARN,
    ENV_STORES,
    ENV_UPLOAD_OWNER,
)
from shared.config.environment import ConfigError, env_float, env_int, env_text, process_environ


@dataclass(frozen=True)
class NotifyConfig:
    sender: str = "skyless@example.com"  # SES sender; must be a verified identity
    backoff_seconds: float = 1.0  # Slack: 1, 2, 4 ... between tries after a 5xx or a network error

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NotifyConfig:
        env = process_environ(environ)
        return cls(
            sender=env_text(env, ENV_NOTIFY_FROM) or cls.sender,
            backoff_seconds=env_float(env, ENV_NOTIFY_BACKOFF_SECONDS, cls.backoff_seconds),
        )


@dataclass(frozen=True)
class UploadConfig:
    # whose a top-level file without owner metadata is; the SAM template sets it empty (None: nobody's)
    default_owner: str | None = "u-local"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> UploadConfig:
        env = process_environ(environ)
        return cls(env.get(ENV_UPLOAD_OWNER, cls.default_owner or "") or None)


@dataclass(frozen=True)
class StorageConfig:
    """Which backend serves which store (`stores`, None: the default for the providers) and their keys."""

    stores: str | None = None  # `s3=aws,r2=r2,gcs=gcs,azure=azure` or `*=local`
    credential_seconds: int = 3600
    s3_endpoint: str | None = None
    storage_role_arn: str | None = None
    allowed_buckets: str | None = None  # comma-separated name patterns (`ml-*`); None: any name
    r2_account_id: str | None = None
    r2_endpoint: str | None = None
    r2_access_key_id: str | None = None
    r2_secret_access_key: str | None = None
    r2_api_token: str | None = None
    cloudflare_api_url: str = "https://api.cloudflare.com/client/v4"
    gcs_endpoint: str | None = None
    gcs_sts_url: str = "https://sts.googleapis.com/v1/token"
    azure_account: str | None = None
    azure_key: str | None = None
    azure_endpoint: str | None = None
    expire_days: int = 0  # objects in buckets skyless creates expire after this many days (0: never)
    keep_last: int = 0  # ... and only the newest this many are kept under each prefix (0: all)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StorageConfig:
        env = process_environ(environ)
        return cls(
            stores=env.get(ENV_STORES),
            credential_seconds=env_int(env, ENV_STORAGE_CREDENTIAL_SECONDS, cls.credential_seconds),
            s3_endpoint=env_text(env, ENV_S3_ENDPOINT),
            storage_role_arn=env.get(ENV_STORAGE_ROLE_ARN),
            allowed_buckets=env_text(env, ENV_STORAGE_BUCKETS),
            r2_account_id=env_text(env, ENV_R2_ACCOUNT_ID),
            r2_endpoint=env_text(env, ENV_R2_ENDPOINT),
            r2_access_key_id=env.get(ENV_R2_ACCESS_KEY_ID),
            r2_secret_access_key=env.get(ENV_R2_SECRET_ACCESS_KEY),
            r2_api_token=env.get(ENV_R2_API_TOKEN),
            cloudflare_api_url=env_text(env, ENV_CLOUDFLARE_API_URL) or cls.cloudflare_api_url,
            gcs_endpoint=env_text(env, ENV_GCS_ENDPOINT),
            gcs_sts_url=env_text(env, ENV_GCS_STS_URL) or cls.gcs_sts_url,
            azure_account=env_text(env, ENV_AZURE_STORAGE_ACCOUNT),
            azure_key=env.get(ENV_AZURE_STORAGE_KEY),
            azure_endpoint=env_text(env, ENV_AZURE_BLOB_ENDPOINT),
            expire_days=_non_negative(env, ENV_CHECKPOINT_EXPIRE_DAYS),
            keep_last=_non_negative(env, ENV_CHECKPOINT_KEEP_LAST),
        )


def _non_negative(env: Mapping[str, str], name: str) -> int:
    value = env_int(env, name, 0)
    if value < 0:
        raise ConfigError(name, str(value), "0 (off) or a positive whole number")
    return value
