"""Settings: everything the control plane reads from its environment, in one frozen object."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

QUEUE_KINDS = ("optimize", "provision", "spot_watch", "submit")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


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
    max_recoveries: int = 10  # preemptions/lost nodes a job survives
    # deadline jobs (shared/jobs/deadlines.py): a launch's cost in progress, the control plane's reaction
    # time the safety net keeps spare, and how soon a place that refused spot is tried again
    restart_overhead_seconds: int = 600
    deadline_reaction_seconds: int = 300
    deadline_retry_seconds: int = 300
    # the role EventBridge Scheduler assumes to send schedule firings (the SAM template's SchedulerRole)
    scheduler_role_arn: str = "arn:aws:iam::123456789012:role/skyless-scheduler"
    # webhooks may reach this machine (SKYLESS_ALLOW_LOOPBACK_WEBHOOKS=1): set by the local runtime only
    allow_loopback_webhooks: bool = False
    # a recovery re-plans and launches in the handler that heard the preemption; with
    # SKYLESS_RELAUNCH_IN_SAME_CALL=0 it only re-plans and provision launches from the message (a role that
    # may not start instances: Lambda's spot_watch, the GCP and Azure forwarders)
    relaunch_in_same_call: bool = True

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        return cls(
            prefix=env.get("SKYLESS_PREFIX", "skyless"),
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            home=Path(env.get("SKYLESS_HOME") or Path.home() / ".skyless"),
            providers=env.get("SKYLESS_PROVIDERS", "*=local"),
            api_url=env.get("SKYLESS_API_URL") or None,
            heartbeat_seconds=_env_int("SKYLESS_HEARTBEAT_SECONDS", 10),
            silent_after_seconds=_env_int("SKYLESS_SILENT_AFTER_SECONDS", 60),
            boot_grace_seconds=_env_int("SKYLESS_BOOT_GRACE_SECONDS", 600),
            stuck_after_seconds=_env_int("SKYLESS_STUCK_AFTER_SECONDS", 300),
            max_wait_retries=_env_int("SKYLESS_MAX_WAIT_RETRIES", 8),
            max_transient_retries=_env_int("SKYLESS_MAX_TRANSIENT_RETRIES", 5),
            max_recoveries=_env_int("SKYLESS_MAX_RECOVERIES", 10),
            restart_overhead_seconds=_env_int("SKYLESS_RESTART_OVERHEAD_SECONDS", 600),
            deadline_reaction_seconds=_env_int("SKYLESS_DEADLINE_REACTION_SECONDS", 300),
            deadline_retry_seconds=_env_int("SKYLESS_DEADLINE_RETRY_SECONDS", 300),
            scheduler_role_arn=env.get("SKYLESS_SCHEDULER_ROLE_ARN") or cls.scheduler_role_arn,
            allow_loopback_webhooks=env.get("SKYLESS_ALLOW_LOOPBACK_WEBHOOKS", "") == "1",
            relaunch_in_same_call=env.get("SKYLESS_RELAUNCH_IN_SAME_CALL", "1") != "0",
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
            "SKYLESS_PREFIX": self.prefix,
            "AWS_DEFAULT_REGION": self.region,
            "SKYLESS_HOME": str(self.home),
            "SKYLESS_PROVIDERS": self.providers,
            "SKYLESS_HEARTBEAT_SECONDS": str(self.heartbeat_seconds),
            "SKYLESS_SILENT_AFTER_SECONDS": str(self.silent_after_seconds),
            "SKYLESS_BOOT_GRACE_SECONDS": str(self.boot_grace_seconds),
            "SKYLESS_STUCK_AFTER_SECONDS": str(self.stuck_after_seconds),
            "SKYLESS_MAX_WAIT_RETRIES": str(self.max_wait_retries),
            "SKYLESS_MAX_TRANSIENT_RETRIES": str(self.max_transient_retries),
            "SKYLESS_MAX_RECOVERIES": str(self.max_recoveries),
            "SKYLESS_RESTART_OVERHEAD_SECONDS": str(self.restart_overhead_seconds),
            "SKYLESS_DEADLINE_REACTION_SECONDS": str(self.deadline_reaction_seconds),
            "SKYLESS_DEADLINE_RETRY_SECONDS": str(self.deadline_retry_seconds),
            "SKYLESS_SCHEDULER_ROLE_ARN": self.scheduler_role_arn,
            "SKYLESS_ALLOW_LOOPBACK_WEBHOOKS": "1" if self.allow_loopback_webhooks else "0",
            "SKYLESS_RELAUNCH_IN_SAME_CALL": "1" if self.relaunch_in_same_call else "0",
        }
        if self.endpoint_url:
            env["AWS_ENDPOINT_URL"] = self.endpoint_url
        if self.api_url:
            env["SKYLESS_API_URL"] = self.api_url
        return env
