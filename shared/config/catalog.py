"""Config of the catalog: where imported catalogs live, how long a warm process trusts the stored
version, which pricing sources a refresh asks (with their keys and endpoints), and the deployment's
contracts file (the prices the team really pays)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from shared.config.env_names import (
    ENV_AWS_PRICING_URL,
    ENV_AZURE_PRICES_URL,
    ENV_CATALOG_TTL_SECONDS,
    ENV_CONTRACTS_FILE,
    ENV_GCP_BILLING_URL,
    ENV_GCP_PRICING_KEY,
    ENV_LAMBDA_API_KEY,
    ENV_LAMBDA_API_URL,
    ENV_PRICE_CLOUDS,
    ENV_RUNPOD_API_KEY,
    ENV_RUNPOD_API_URL,
)
from shared.config.environment import env_float, env_text, process_environ
from shared.config.settings import home_from_env


@dataclass(frozen=True)
class CatalogConfig:
    home: Path = field(default_factory=lambda: Path.home() / ".skyless")  # imports go to <home>/catalog
    ttl_seconds: float = 60.0  # how long a warm process trusts its catalog before asking LATEST again

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CatalogConfig:
        env = process_environ(environ)
        return cls(home=home_from_env(env), ttl_seconds=env_float(env, ENV_CATALOG_TTL_SECONDS, 60.0))


@dataclass(frozen=True)
class ContractsConfig:
    """The deployment's contracts file (`contracts:` and SkyPilot's reservation keys, as in
    shared/optimizer/contract_terms.py); None: every plan at list price."""

    path: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ContractsConfig:
        named = env_text(process_environ(environ), ENV_CONTRACTS_FILE)
        return cls(path=Path(named).expanduser() if named else None)


@dataclass(frozen=True)
class PriceSourcesConfig:
    """`clouds` None: the default set (AWS, Azure, and each keyed source whose key is there)."""

    clouds: tuple[str, ...] | None = None
    gcp_pricing_key: str | None = None
    lambda_api_key: str | None = None  # None: the Lambda Cloud provider's key file
    runpod_api_key: str | None = None
    aws_pricing_url: str | None = None  # None: each source's public endpoint
    azure_prices_url: str | None = None
    gcp_billing_url: str | None = None
    lambda_api_url: str | None = None
    runpod_api_url: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PriceSourcesConfig:
        env = process_environ(environ)
        named = env.get(ENV_PRICE_CLOUDS)
        return cls(
            clouds=tuple(c.strip().lower() for c in named.split(",") if c.strip()) if named else None,
            gcp_pricing_key=env_text(env, ENV_GCP_PRICING_KEY),
            lambda_api_key=env_text(env, ENV_LAMBDA_API_KEY),
            runpod_api_key=env_text(env, ENV_RUNPOD_API_KEY),
            aws_pricing_url=env_text(env, ENV_AWS_PRICING_URL),
            azure_prices_url=env_text(env, ENV_AZURE_PRICES_URL),
            gcp_billing_url=env_text(env, ENV_GCP_BILLING_URL),
            lambda_api_url=env_text(env, ENV_LAMBDA_API_URL),
            runpod_api_url=env_text(env, ENV_RUNPOD_API_URL),
        )
