"""The API bodies of notification settings (`/notifications`) and the per-submission override."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import ConfigDict, Field

from shared.api.deferred_model import DeferredModel


class RequestBody(DeferredModel):
    """As shared.api.models.RequestBody (which imports this module): unknown fields are named, not ignored."""

    model_config = ConfigDict(extra="forbid")


Topic = Literal["preempted", "recovered", "succeeded", "failed", "no_capacity", "budget", "market", "overrun"]


class NotificationSettingsRequest(RequestBody):
    """Fields left out are unchanged; `null` or "" clears a channel."""

    slack_webhook: str | None = Field(
        None,
        max_length=2048,
        description="A Slack incoming webhook URL; kept as a secret, shown masked.",
    )
    email: str | None = Field(None, max_length=254, description="Where SES sends the notifications.")
    on: list[Topic] | None = Field(
        None, max_length=len(get_args(Topic)), description="The events to hear about (default: all)."
    )


class NotificationSettingsResponse(DeferredModel):
    configured: bool
    slack_webhook: str | None = Field(None, description="Masked: the host and the last 4 characters.")
    email: str | None = None
    on: list[str]
    message: str


class NotifyOverride(RequestBody):
    """One submission's channels instead of the user's (each one replaces the user's for this job)."""

    slack_webhook: str | None = Field(None, max_length=2048, description="Kept as a secret for this job.")
    email: str | None = Field(None, max_length=254)


class DeliveryResult(DeferredModel):
    channel: str
    status: str
    attempts: int
    target: str
    error: str | None = None


class NotificationTestResponse(DeferredModel):
    deliveries: list[DeliveryResult]
    message: str


class TeamNotifyRequest(RequestBody):
    """`null` or "" clears the team's channel."""

    slack_webhook: str | None = Field(
        ...,
        max_length=2048,
        description="A Slack incoming webhook URL for the team's budget notices (a secret, shown masked).",
    )


class TeamNotifyResponse(DeferredModel):
    team: str
    slack_webhook: str | None = Field(None, description="Masked: the host and the last 4 characters.")
    message: str
