"""The control plane's own secrets and clocks, read where they are used (each call reads afresh, so a
test or an operator can change them without rebuilding a Settings): node credentials, the reaper's
grace, dashboard sessions, and whether pydantic's plugins are off."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.config.env_names import (
    ENV_AGENT_SECRET,
    ENV_AGENT_SECRET_ARN,
    ENV_BOOT_WINDOW_SECONDS,
    ENV_LAMBDA_FUNCTION_NAME,
    ENV_PYDANTIC_DISABLE_PLUGINS,
    ENV_REAPER_GRACE_SECONDS,
    ENV_RELIABILITY_PRIOR_DAYS,
    ENV_SESSION_SECONDS,
    ENV_SESSION_SECRET,
)
from shared.config.environment import ConfigError, env_int, env_text, process_environ

PYDANTIC_PLUGINS_OFF = ("__all__", "1", "true")


@dataclass(frozen=True)
class NodeCredentialsConfig:
    """Where the key that signs node credentials comes from, and how long a boot token lives."""

    agent_secret: str | None = None  # the key itself (local runtime, tests)
    agent_secret_arn: str | None = None  # else the Secrets Manager secret holding it (the SAM template)
    on_lambda: bool = False  # in Lambda neither is a deployment fault: no local key file is made
    boot_window_seconds: int = 1800  # a node boots, installs and asks for its config within this

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NodeCredentialsConfig:
        env = process_environ(environ)
        return cls(
            agent_secret=env_text(env, ENV_AGENT_SECRET),
            agent_secret_arn=env_text(env, ENV_AGENT_SECRET_ARN),
            on_lambda=bool(env.get(ENV_LAMBDA_FUNCTION_NAME)),
            boot_window_seconds=env_int(env, ENV_BOOT_WINDOW_SECONDS, cls.boot_window_seconds),
        )


@dataclass(frozen=True)
class ReaperConfig:
    grace_seconds: int = 300  # an unowned cluster younger than this may still be being recorded

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReaperConfig:
        return cls(env_int(process_environ(environ), ENV_REAPER_GRACE_SECONDS, cls.grace_seconds))


@dataclass(frozen=True)
class ReliabilityPriorConfig:
    """Opt-in: plans weigh places by the provider scorecard of the last `days` days (0: off)."""

    days: int = 0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReliabilityPriorConfig:
        days = env_int(process_environ(environ), ENV_RELIABILITY_PRIOR_DAYS, cls.days)
        if not 0 <= days <= 366:
            raise ConfigError(ENV_RELIABILITY_PRIOR_DAYS, str(days), "a whole number of days, 0 (off) to 366")
        return cls(days)


@dataclass(frozen=True)
class DashboardConfig:
    session_seconds: int = 4 * 3600
    session_secret: str | None = None  # None: derived from the control-plane secret

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DashboardConfig:
        env = process_environ(environ)
        return cls(
            session_seconds=env_int(env, ENV_SESSION_SECONDS, cls.session_seconds),
            session_secret=env_text(env, ENV_SESSION_SECRET),
        )


def pydantic_plugins_off(environ: Mapping[str, str] | None = None) -> bool:
    """`PYDANTIC_DISABLE_PLUGINS` turns all of them off (what the SAM template sets)."""
    return process_environ(environ).get(ENV_PYDANTIC_DISABLE_PLUGINS) in PYDANTIC_PLUGINS_OFF
