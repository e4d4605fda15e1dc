"""Per-user notification settings and per-job overrides.

A user sets a Slack webhook, an email address and the topics to hear about; a submission may override
the webhook and/or the address for one job. Nothing configured = no notifications. Webhook URLs go to
Secrets Manager (shared/notifications/webhook_secrets.py); the table keeps the secret's name.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Final

from shared.config import Settings
from shared.errors import UserError
from shared.notifications.events import DEFAULT_TOPICS, TOPICS
from shared.notifications.outbound_http import check_public_url
from shared.notifications.webhook_secrets import (
    delete_webhook,
    job_secret_name,
    mask_webhook,
    read_webhook,
    store_webhook,
    user_secret_name,
)
from shared.store.notifications import NotificationStore

EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
MAX_URL_CHARS = 2048


class _Unset:
    pass


UNSET: Final = _Unset()


@dataclass(frozen=True)
class UserNotificationSettings:
    slack_masked: str | None
    email: str | None
    topics: tuple[str, ...]

    @property
    def configured(self) -> bool:
        return bool(self.slack_masked or self.email)


@dataclass(frozen=True)
class Channels:
    """Where one job's notifications go (clear webhook URL: held in memory only, never stored or logged)."""

    slack_webhook: str | None
    email: str | None
    topics: frozenset[str]
    since: float = 0.0  # epoch seconds the channels were last set: earlier events are not announced


WEBHOOK_HINT = "give the Slack incoming webhook URL (https://hooks.slack.com/...)"


def check_webhook(url: str, field: str = "slack_webhook", *, allow_loopback: bool = False) -> str:
    """The URL if skyless may post to it: https to a host whose addresses are all public."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS or not re.match(r"^https?://[^/\s]+(/\S*)?$", url):
        raise UserError("not a webhook URL", field=field, hint=WEBHOOK_HINT)
    return check_public_url(url, field=field, allow_loopback=allow_loopback, hint=WEBHOOK_HINT)


def check_email(address: str, field: str = "email") -> str:
    address = address.strip()
    if len(address) > 254 or not EMAIL_PATTERN.match(address):
        raise UserError(f"not an email address: {address[:80]!r}", field=field, hint="like alice@example.com")
    return address


def check_topics(topics: list[str], field: str = "on") -> tuple[str, ...]:
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        raise UserError(f"unknown event {unknown[0]!r}", field=field, hint=f"choose from {', '.join(TOPICS)}")
    return tuple(dict.fromkeys(topics))


def _records(settings: Settings) -> NotificationStore:
    from shared.wiring import wiring_for

    return wiring_for(settings).notifications


def user_settings(settings: Settings, owner: str) -> UserNotificationSettings:
    item = _records(settings).read(f"user#{owner}")
    if item is None:
        return UserNotificationSettings(None, None, DEFAULT_TOPICS)
    url = read_webhook(settings, item.slack_secret) if item.slack_secret else None
    topics = tuple(str(t) for t in item.topics) if item.topics is not None else DEFAULT_TOPICS
    return UserNotificationSettings(mask_webhook(url) if url else None, item.email, topics)


def update_user_settings(
    settings: Settings,
    owner: str,
    *,
    slack_webhook: str | _Unset | None = UNSET,
    email: str | _Unset | None = UNSET,
    topics: list[str] | _Unset | None = UNSET,
) -> UserNotificationSettings:
    """Change what is given; None (or "") clears a channel. Idempotent."""
    records = _records(settings)
    item = records.read(f"user#{owner}") or records.new_item(f"user#{owner}")
    if not isinstance(slack_webhook, _Unset):
        secret = user_secret_name(settings, owner)
        if slack_webhook:
            url = check_webhook(slack_webhook, allow_loopback=settings.allow_loopback_webhooks)
            item.slack_secret = store_webhook(settings, secret, url)
        else:
            delete_webhook(settings, secret)
            item.slack_secret = None
    if not isinstance(email, _Unset):
        item.email = check_email(email) if email else None
    if not isinstance(topics, _Unset):
        item.topics = list(check_topics(topics)) if topics is not None else None  # type: ignore[arg-type]
    item.updated_at = time.time()
    records.save(item)
    return user_settings(settings, owner)


def store_job_override(
    settings: Settings, job_id: str, *, slack_webhook: str | None, email: str | None
) -> None:
    """One job's channels instead of its owner's (either or both)."""
    if not slack_webhook and not email:
        return
    records = _records(settings)
    item = records.new_item(f"job#{job_id}", updated_at=time.time())
    if slack_webhook:
        url = check_webhook(slack_webhook, allow_loopback=settings.allow_loopback_webhooks)
        item.slack_secret = store_webhook(settings, job_secret_name(settings, job_id), url)
    if email:
        item.email = check_email(email)
    records.save(item)


def channels_for(settings: Settings, owner: str, job_id: str | None) -> Channels:
    """The owner's channels, each replaced by the job's override when it has one."""
    records = _records(settings)
    user = records.read(f"user#{owner}")
    job = records.read(f"job#{job_id}") if job_id else None
    slack_secret = (job.slack_secret if job else None) or (user.slack_secret if user else None)
    email = (job.email if job else None) or (user.email if user else None)
    topics = DEFAULT_TOPICS if user is None or user.topics is None else tuple(str(t) for t in user.topics)
    webhook = read_webhook(settings, slack_secret) if slack_secret else None
    since = (
        max(float(item.updated_at or 0) for item in (user, job) if item is not None) if user or job else 0.0
    )
    return Channels(webhook, email, frozenset(topics), since)
