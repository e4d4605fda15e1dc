"""Which provider serves which cloud: configuration (`SKYLESS_PROVIDERS`), decided here and nowhere else."""

from __future__ import annotations

import logging

from shared.clouds.base import CloudProvider
from shared.clouds.errors import CloudAuthError
from shared.config import Settings

logger = logging.getLogger("skyless.clouds")


def parse_provider_map(text: str) -> dict[str, str]:
    """`"aws=aws,gcp=gcp"` or `"*=local"` -> {cloud: provider name}."""
    mapping: dict[str, str] = {}
    for part in text.split(","):
        cloud, sep, provider = part.strip().partition("=")
        if part.strip() and sep:
            mapping[cloud.strip().lower()] = provider.strip().lower()
    return mapping


class ProviderRegistry:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.mapping = parse_provider_map(settings.providers)
        self._built: dict[str, CloudProvider] = {}

    def provider_for(self, cloud: str) -> CloudProvider:
        """The provider serving `cloud`, or CloudAuthError (the cloud is not enabled: block it)."""
        name = self.mapping.get(cloud.lower()) or self.mapping.get("*")
        if name is None:
            raise CloudAuthError(f"no provider configured for cloud {cloud!r} (SKYLESS_PROVIDERS)")
        return self.build(name)

    def provider_name(self, cloud: str) -> str | None:
        """The name of the provider serving `cloud` (None: none is configured), without building it."""
        return self.mapping.get(cloud.lower()) or self.mapping.get("*")

    def served_clouds(self) -> set[str] | None:
        """The clouds some provider serves; None when every cloud is (`*=...`)."""
        return None if "*" in self.mapping else set(self.mapping)

    def all_providers(self) -> list[CloudProvider]:
        return [self.build(name) for name in sorted(set(self.mapping.values()))]

    def usable_providers(self) -> list[CloudProvider]:
        """Every configured provider that can be built (credentials present): what sweeps walk."""
        usable = []
        for name in sorted(set(self.mapping.values())):
            try:
                usable.append(self.build(name))
            except CloudAuthError as error:
                logger.warning("provider %s skipped: %s", name, error)
        return usable

    def build(self, name: str) -> CloudProvider:
        if name not in self._built:
            self._built[name] = self._construct(name)
        return self._built[name]

    def _construct(self, name: str) -> CloudProvider:
        if name == "local":
            from shared.clouds.local import LocalCloud

            return LocalCloud(self.settings.home, api_url=self.settings.api_url)
        if name == "gcp":
            from shared.clouds.gcp_tpu import GcpCloud  # Compute Engine VMs and TPU VMs

            return GcpCloud.from_env()
        if name == "azure":
            from shared.clouds.azure import AzureCompute

            return AzureCompute.from_env()
        if name == "lambda":
            from shared.clouds.lambda_cloud import LambdaCloud

            return LambdaCloud.from_env()
        if name == "runpod":
            from shared.clouds.runpod import RunPod

            return RunPod.from_env()
        if name == "aws":
            from shared.clouds.aws import AwsCloud

            return AwsCloud.from_settings(self.settings)
        raise CloudAuthError(f"provider {name!r} is not built into this skyless (SKYLESS_PROVIDERS)")
