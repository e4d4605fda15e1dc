"""Which pricing sources a refresh asks, from the environment, and the scheduled entry point.

`SKYLESS_PRICE_CLOUDS` (comma list) names them; by default AWS and Azure (their price APIs need no
extra secret) plus GCP, Lambda Cloud and RunPod when their keys are there (`SKYLESS_GCP_PRICING_KEY`, an
API key for the Cloud Billing Catalog; `LAMBDA_API_KEY` or ~/.lambda_cloud/lambda_keys; `RUNPOD_API_KEY`).
Endpoints can be pointed elsewhere (tests, proxies): `SKYLESS_AWS_PRICING_URL`, `SKYLESS_AZURE_PRICES_URL`,
`SKYLESS_GCP_BILLING_URL`, `SKYLESS_LAMBDA_API_URL`, `SKYLESS_RUNPOD_API_URL`; EC2 follows
`AWS_ENDPOINT_URL` like every client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.config import Settings
from shared.config.catalog import PriceSourcesConfig
from shared.config.env_names import ENV_PRICE_CLOUDS
from shared.errors import UserError
from shared.price_refresh.quotes import PriceFetcher
from shared.price_refresh.refresh import refresh_catalog

KNOWN = ("aws", "azure", "gcp", "lambda", "runpod")


def price_fetchers(
    settings: Settings, env: Mapping[str, str] | None = None, config: PriceSourcesConfig | None = None
) -> list[PriceFetcher]:
    """The sources `config` names (default: read from `env`, default this process's environment)."""
    config = config or PriceSourcesConfig.from_env(env)
    if config.clouds is not None:
        clouds = list(config.clouds)
    else:
        keyed = (
            ("gcp", config.gcp_pricing_key),
            ("lambda", _lambda_key(config)),
            ("runpod", config.runpod_api_key),
        )
        clouds = ["aws", "azure"] + [cloud for cloud, key in keyed if key]
    unknown = [c for c in clouds if c not in KNOWN]
    if unknown:
        raise UserError(f"no price source for {', '.join(unknown)}", field=ENV_PRICE_CLOUDS,
                        hint=f"known: {', '.join(KNOWN)}")  # fmt: skip
    return [_fetcher(cloud, settings, config) for cloud in clouds]


def _fetcher(cloud: str, settings: Settings, config: PriceSourcesConfig) -> PriceFetcher:
    if cloud == "aws":
        from shared.price_refresh.aws_prices import AwsPriceFetcher

        return AwsPriceFetcher(settings.endpoint_url, config.aws_pricing_url)
    if cloud == "azure":
        from shared.price_refresh.azure_prices import DEFAULT_URL, AzurePriceFetcher

        return AzurePriceFetcher(config.azure_prices_url or DEFAULT_URL)
    if cloud == "gcp":
        from shared.price_refresh.gcp_prices import DEFAULT_URL, GcpPriceFetcher

        return GcpPriceFetcher(config.gcp_pricing_key or "", config.gcp_billing_url or DEFAULT_URL)
    if cloud == "lambda":
        from shared.price_refresh.lambda_prices import DEFAULT_URL, LambdaPriceFetcher

        return LambdaPriceFetcher(config.lambda_api_key or "", config.lambda_api_url or DEFAULT_URL)
    from shared.price_refresh.runpod_prices import DEFAULT_URL, RunPodPriceFetcher

    return RunPodPriceFetcher(config.runpod_api_key or "", config.runpod_api_url or DEFAULT_URL)


def _lambda_key(config: PriceSourcesConfig) -> str | None:
    """`LAMBDA_API_KEY`, else the key file the Lambda Cloud provider reads (SkyPilot's)."""
    if config.lambda_api_key:
        return config.lambda_api_key
    from shared.clouds.lambda_cloud import api_key_from_file

    return api_key_from_file()


def refresh_catalog_event(event: dict[str, Any]) -> dict[str, Any]:
    """The scheduled refresh. The event's content does not matter: each run asks every source."""
    from shared.aws.object_store import S3ObjectStore

    settings = Settings.from_env()
    return refresh_catalog(S3ObjectStore(settings), price_fetchers(settings)).as_dict()
