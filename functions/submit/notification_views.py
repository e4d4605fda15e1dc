"""Between the `/notifications` bodies and shared.notifications: read, change and try a user's settings."""

from __future__ import annotations

from shared.api.notification_models import (
    DeliveryResult,
    NotificationSettingsRequest,
    NotificationSettingsResponse,
    NotificationTestResponse,
)
from shared.config import Settings
from shared.notifications.dispatch import send_test
from shared.notifications.settings import UNSET, UserNotificationSettings, update_user_settings, user_settings
from shared.store.users import User

NOTHING_CONFIGURED = "no notifications: nothing is configured (set a Slack webhook or an email address)"


def _answer(current: UserNotificationSettings) -> NotificationSettingsResponse:
    channels = [name for name, value in (("Slack", current.slack_masked), ("email", current.email)) if value]
    message = f"notifying by {' and '.join(channels)} on {', '.join(current.topics) or 'nothing'}"
    return NotificationSettingsResponse(
        configured=current.configured,
        slack_webhook=current.slack_masked,
        email=current.email,
        on=list(current.topics),
        message=message if current.configured else NOTHING_CONFIGURED,
    )


def show(settings: Settings, caller: User) -> NotificationSettingsResponse:
    return _answer(user_settings(settings, caller.user_id))


def update(
    settings: Settings, caller: User, body: NotificationSettingsRequest
) -> NotificationSettingsResponse:
    given = body.model_fields_set
    current = update_user_settings(
        settings,
        caller.user_id,
        slack_webhook=body.slack_webhook if "slack_webhook" in given else UNSET,
        email=body.email if "email" in given else UNSET,
        topics=list(body.on) if "on" in given and body.on is not None else UNSET,
    )
    return _answer(current)


def test(settings: Settings, caller: User) -> NotificationTestResponse:
    deliveries = send_test(settings, caller.user_id)
    results = [DeliveryResult.model_validate(d.as_dict()) for d in deliveries]
    message = ", ".join(f"{r.channel}: {r.status}" for r in results) or NOTHING_CONFIGURED
    return NotificationTestResponse(deliveries=results, message=message)
