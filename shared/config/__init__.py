"""Configuration, one frozen object per concern, each built from the environment by its `from_env` here
and nowhere else (tests/unit/test_config_is_read_in_one_place.py checks that nothing in shared/ or
functions/ reads `os.environ` outside this package). Variable names are constants in `env_names`.

- `Settings` (settings): the control plane: prefix, region, endpoint, home, providers, lifecycle timings.
- control_plane: `NodeCredentialsConfig`, `ReaperConfig`, `ReliabilityPriorConfig`, `DashboardConfig`,
  `pydantic_plugins_off`.
- clouds: `AwsConfig`, `GcpConfig`, `AzureConfig`, `LambdaConfig`, `RunPodConfig`, `LocalCloudConfig`.
- channels: `NotifyConfig`, `UploadConfig`, `StorageConfig`.  catalog: `CatalogConfig`, `PriceSourcesConfig`,
  `ContractsConfig`.
A bad value is a `ConfigError` (a ValueError) naming the variable.
"""

from shared.config import env_names
from shared.config.environment import ConfigError
from shared.config.settings import QUEUE_KINDS, Settings

__all__ = [
    "QUEUE_KINDS",
    "ConfigError",
    "Settings",
    "catalog",
    "channels",
    "clouds",
    "control_plane",
    "env_names",
    "environment",
    "settings",
]
