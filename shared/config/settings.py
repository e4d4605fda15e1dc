"""Settings: the control plane's tables, queues, endpoint and lifecycle timings, in one frozen object.

Other concerns (clouds, notifications, the catalog, node credentials) have their own config objects beside
this one in shared/config/."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from shared.config.env_names import (
    ENV_ALLOW_LOOPBACK_WEBHOOKS,
    ENV_API_URL,
    ENV_AUTOSTOP_MINUTE_SECONDS,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_ENDPOINT_URL,
    ENV_AWS_REGION,
    ENV_BOOT_GRACE_SECONDS,
    ENV_CLUSTER_POLL_SECONDS,
    ENV_CRASH_LOOP_LIMIT,
    ENV_DEADLINE_REACTION_SECONDS,
    ENV_DEADLINE_RETRY_SECONDS,
    ENV_HEARTBEAT_SECONDS,
    ENV_HOME,
    ENV_MAX_TRANSIENT_RETRIES,
    ENV_MAX_WAIT_RETRIES,
    ENV_PREFIX,
    ENV_PROVIDERS,
    ENV_RELAUNCH_IN_SAME_CALL,
    ENV_RESTART_OVERHEAD_SECONDS,
    ENV_RETENTION_DAYS,
    ENV_SCHEDULER_ROLE_ARN,
    ENV_SILENT_AFTER_SECONDS,
    ENV_SPOT_REFUSALS_PER_HOUR,
    ENV_STUCK_AFTER_SECONDS,
)
from shared.config.environment import ConfigError, env_float, env_int, process_environ

QUEUE_KINDS = ("optimize", "provision", "spot_watch", "submit", "teardown")


def home_from_env(environ: Mapping[str, str]) -> Path:
    """`$SKYLESS_HOME`, default ~/.skyless."""
    return Path(environ.get(ENV_HOME) or Path.home() / ".skyless")


def _retention_days(env: Mapping[str, str]) -> int:
    days = env_int(env, ENV_RETENTION_DAYS, 400)
    if days < 1:
        raise ConfigError(ENV_RETENTION_DAYS, str(days), "a whole number of days, 1 or more")
    return days


@dataclass(frozen=True)
class Settings:
    """Names of every table/queue/bucket derive from `prefix`, so one endpoint can hold many stacks."""

    prefix: str = "skyless"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    home: Path = field(default_factory=lambda: Path.home() / ".skyless")
    providers: str = "*=local"  # SKYLESS_PROVIDERS: "aws=aws,gcp=gcp" or "*=local"
    api_url: str | None = None  # what node agents call back (SKYLESS_API_URL)
    heartbeat_seconds: int = 10
    silent_after_seconds: int = 60  # reconcile: a live node silent longer than this is lost
    boot_grace_seconds: int = 600  # ... but a node that never reported gets this long to boot
    stuck_after_seconds: int = 300  # reconcile: PLANNED/PROVISIONING longer than this is re-driven
    max_wait_retries: int = 8  # WAITING rounds before "no capacity anywhere"
    max_transient_retries: int = 5
    crash_loop_limit: int = 5  # attempts in a row lost before the task started, none preempted
    cluster_poll_seconds: float = 2.0  # how often an idle cluster's agents ask for work (README: idle cost)
    autostop_minute_seconds: float = 60.0  # the length of an autostop "minute" (tests shorten the clock)
    # deadline jobs (shared/jobs/deadlines.py): a launch's cost in progress, the control plane's reaction
    # time the safety net keeps spare, and how soon a place that refused spot is tried again
    restart_overhead_seconds: int = 600
    deadline_reaction_seconds: int = 300
    deadline_retry_seconds: int = 300
    spot_refusals_per_hour: int = 12  # refused spot launches one job may cause per hour (0: no limit)
    # the role EventBridge Scheduler assumes to send schedule firings (the SAM template's SchedulerRole)
    scheduler_role_arn: str = "arn:aws:iam::123456789012:role/skyless-scheduler"
    # webhooks may reach this machine (SKYLESS_ALLOW_LOOPBACK_WEBHOOKS=1): set by the local runtime only
    allow_loopback_webhooks: bool = False
    # a recovery re-plans and launches in the handler that heard the preemption; with
    # SKYLESS_RELAUNCH_IN_SAME_CALL=0 it only re-plans and provision launches from the message (a role that
    # may not start instances: Lambda's spot_watch, the GCP and Azure forwarders)
    relaunch_in_same_call: bool = True
    # finished jobs, their timelines and clusters expire (DynamoDB TTL) this long after they end
    retention_days: int = 400

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86400

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """From `environ` (default: this process's environment); a bad number is a ConfigError naming it."""
        env = process_environ(environ)
        return cls(
            prefix=env.get(ENV_PREFIX, "skyless"),
            region=env.get(ENV_AWS_REGION) or env.get(ENV_AWS_DEFAULT_REGION) or "us-east-1",
            endpoint_url=env.get(ENV_AWS_ENDPOINT_URL) or None,
            home=home_from_env(env),
            providers=env.get(ENV_PROVIDERS, "*=local"),
            api_url=env.get(ENV_API_URL) or None,
            heartbeat_seconds=env_int(env, ENV_HEARTBEAT_SECONDS, 10),
            silent_after_seconds=env_int(env, ENV_SILENT_AFTER_SECONDS, 60),
            boot_grace_seconds=env_int(env, ENV_BOOT_GRACE_SECONDS, 600),
            stuck_after_seconds=env_int(env, ENV_STUCK_AFTER_SECONDS, 300),
            max_wait_retries=env_int(env, ENV_MAX_WAIT_RETRIES, 8),
            max_transient_retries=env_int(env, ENV_MAX_TRANSIENT_RETRIES, 5),
            crash_loop_limit=env_int(env, ENV_CRASH_LOOP_LIMIT, 5),
            restart_overhead_seconds=env_int(env, ENV_RESTART_OVERHEAD_SECONDS, 600),
            deadline_reaction_seconds=env_int(env, ENV_DEADLINE_REACTION_SECONDS, 300),
            deadline_retry_seconds=env_int(env, ENV_DEADLINE_RETRY_SECONDS, 300),
            spot_refusals_per_hour=env_int(env, ENV_SPOT_REFUSALS_PER_HOUR, 12),
            scheduler_role_arn=env.get(ENV_SCHEDULER_ROLE_ARN) or cls.scheduler_role_arn,
            cluster_poll_seconds=env_float(env, ENV_CLUSTER_POLL_SECONDS, 2.0),
            autostop_minute_seconds=env_float(env, ENV_AUTOSTOP_MINUTE_SECONDS, 60.0),
            allow_loopback_webhooks=env.get(ENV_ALLOW_LOOPBACK_WEBHOOKS, "") == "1",
            relaunch_in_same_call=env.get(ENV_RELAUNCH_IN_SAME_CALL, "1") != "0",
            retention_days=_retention_days(env),
        )

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    def table_name(self, kind: str) -> str:
        return f"{self.prefix}-{kind}"

    def queue_name(self, kind: str) -> str:
        return f"{self.prefix}-{kind.replace('_', '-')}"

    @property
    def bucket(self) -> str:
        return f"{self.prefix}-artifacts".lower()

    @property
    def local_dir(self) -> Path:
        return self.home / "local"

    def to_env(self) -> dict[str, str]:
        """The environment that makes `from_env()` in another process return these settings."""
        env = {
            ENV_PREFIX: self.prefix,
            ENV_AWS_DEFAULT_REGION: self.region,
            ENV_HOME: str(self.home),
            ENV_PROVIDERS: self.providers,
            ENV_HEARTBEAT_SECONDS: str(self.heartbeat_seconds),
            ENV_SILENT_AFTER_SECONDS: str(self.silent_after_seconds),
            ENV_BOOT_GRACE_SECONDS: str(self.boot_grace_seconds),
            ENV_STUCK_AFTER_SECONDS: str(self.stuck_after_seconds),
            ENV_MAX_WAIT_RETRIES: str(self.max_wait_retries),
            ENV_MAX_TRANSIENT_RETRIES: str(self.max_transient_retries),
            ENV_CRASH_LOOP_LIMIT: str(self.crash_loop_limit),
            ENV_RESTART_OVERHEAD_SECONDS: str(self.restart_overhead_seconds),
            ENV_DEADLINE_REACTION_SECONDS: str(self.deadline_reaction_seconds),
            ENV_DEADLINE_RETRY_SECONDS: str(self.deadline_retry_seconds),
            ENV_SPOT_REFUSALS_PER_HOUR: str(self.spot_refusals_per_hour),
            ENV_SCHEDULER_ROLE_ARN: self.scheduler_role_arn,
            ENV_CLUSTER_POLL_SECONDS: str(self.cluster_poll_seconds),
            ENV_AUTOSTOP_MINUTE_SECONDS: str(self.autostop_minute_seconds),
            ENV_ALLOW_LOOPBACK_WEBHOOKS: "1" if self.allow_loopback_webhooks else "0",
            ENV_RELAUNCH_IN_SAME_CALL: "1" if self.relaunch_in_same_call else "0",
            ENV_RETENTION_DAYS: str(self.retention_days),
        }
        if self.endpoint_url:
            env[ENV_AWS_ENDPOINT_URL] = self.endpoint_url
        if self.api_url:
            env[ENV_API_URL] = self.api_url
        return env
