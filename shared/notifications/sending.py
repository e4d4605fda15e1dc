"""One notification's send on one channel (Slack or email), and whether an event predates a user's channels.
Used by the job events' dispatch and the team notices alike."""

from __future__ import annotations

from shared.config import Settings
from shared.notifications.deliveries import Delivery
from shared.notifications.email import send_email
from shared.notifications.events import Notification
from shared.notifications.slack import post_to_slack, slack_payload
from shared.notifications.webhook_secrets import mask_webhook


def happened_before(at: str, since: float) -> bool:
    """Whether an event's `at` ("<epoch seconds>#<suffix>", the events table's sort key) is earlier than
    `since` (epoch seconds); False when it cannot be read."""
    try:
        return float(at.partition("#")[0]) < since
    except ValueError:
        return False


def deliver(settings: Settings, channel: str, target: str, notification: Notification) -> Delivery:
    """One channel's send; any exception is a failed delivery (a notification never fails a job)."""
    try:
        if channel == "slack":
            return post_to_slack(
                target, slack_payload(notification), allow_loopback=settings.allow_loopback_webhooks
            )
        return send_email(settings, target, notification)
    except Exception as error:
        shown = mask_webhook(target) if channel == "slack" else target
        return Delivery(channel, False, 1, shown, f"{type(error).__name__}")
