"""A team budget's notices, told to the whole team: one event in the team's partition of the events table
(`team#<team>`, kind `budget`, written once per threshold and month by shared/jobs/budget_checks.py) goes to
every member's own channels (those who hear `budget`; a member with no job running is told too) and to the
team's Slack channel when its admin set one (`skyless team notify TEAM --slack URL`).

Each (event, member, channel) send is claimed first, so a stream record delivered twice sends once. A team's
webhook lives in Secrets Manager as a user's does; the notifications table keeps only the secret's name
(`team#<team>` item).
"""

from __future__ import annotations

import logging
import time

from shared.config import Settings
from shared.errors import ForbiddenError, NotFoundError
from shared.notifications.deliveries import Delivery
from shared.notifications.events import NOTIFY_KIND, TEAM_PREFIX, JobFacts, Notification, TimelineRecord
from shared.notifications.sending import deliver, happened_before
from shared.notifications.settings import channels_for, check_webhook
from shared.notifications.webhook_secrets import (
    delete_webhook,
    mask_webhook,
    read_webhook,
    store_webhook,
    team_secret_name,
)
from shared.wiring import wiring_for

log = logging.getLogger("skyless.notify")
BUDGET_TOPIC = "budget"
TEAM_CHANNEL = "(the team's channel)"  # no user id has parentheses


def team_channel_key(team: str) -> str:
    """The notifications table's item of a team's own channel."""
    return f"{TEAM_PREFIX}{team}"


def _team_channel_url(settings: Settings, team: str) -> str | None:
    own = wiring_for(settings).notifications.read(team_channel_key(team))
    return read_webhook(settings, own.slack_secret) if own is not None and own.slack_secret else None


def _check_member(settings: Settings, team: str, caller: str, *, admin_key: bool) -> None:
    """A team exists to its members and to admin keys only: to anyone else it is missing (404)."""
    from shared.tenants import admin

    members = wiring_for(settings).budgets.members_of(team) if len(team) <= 63 else set()
    if caller not in members and not (admin_key and team in admin.teams(settings)):
        raise NotFoundError(f"no team {team}", field="team", hint="`skyless team list` shows your teams")


def team_channel(settings: Settings, team: str, caller: str, *, admin_key: bool = False) -> str | None:
    """The team's Slack webhook, masked (its members and admin keys); None when it has none."""
    _check_member(settings, team, caller, admin_key=admin_key)
    url = _team_channel_url(settings, team)
    return mask_webhook(url) if url else None


def set_team_channel(
    settings: Settings, team: str, caller: str, slack_webhook: str | None, *, admin_key: bool = False
) -> str | None:
    """Set (or, with None or "", clear) the team's Slack webhook: an admin key or the team's admin only.
    The URL goes to Secrets Manager; the table keeps the secret's name. Idempotent; answers it masked."""
    from shared.tenants.members import is_team_admin

    _check_member(settings, team, caller, admin_key=admin_key)
    if not (admin_key or is_team_admin(settings, team, caller)):
        raise ForbiddenError("only an admin key or the team's admin may set the team's channel", field="team")
    records = wiring_for(settings).notifications
    item = records.read(team_channel_key(team)) or records.new_item(team_channel_key(team))
    secret = team_secret_name(settings, team)
    if slack_webhook:
        url = check_webhook(slack_webhook, allow_loopback=settings.allow_loopback_webhooks)
        item.slack_secret = store_webhook(settings, secret, url)
    else:
        delete_webhook(settings, secret)
        item.slack_secret = None
    item.updated_at = time.time()
    records.save(item)
    return team_channel(settings, team, caller, admin_key=admin_key)


def compose_team_notice(team: str, record: TimelineRecord) -> Notification:
    detail = record.detail
    percent = detail.get("percent")
    facts = JobFacts(job_id=record.job_id, name=f"team {team}", state="-")
    lines = (
        ("Team", team),
        ("Spent", f"${float(detail.get('spent') or 0):,.2f} of ${float(detail.get('limit') or 0):,.2f}"),
        ("At 100 %", "stop" if detail.get("action") == "stop" else "warn only"),
    )
    subject = f"skyless: team {team} reached {percent} % of its monthly budget"
    return Notification(BUDGET_TOPIC, subject, record.message, facts, extra_lines=lines)


def notify_team(settings: Settings, record: TimelineRecord) -> list[Delivery]:
    """Send a team's budget event to each member's channels and to the team's own; the deliveries made now."""
    if record.kind != BUDGET_TOPIC:
        return []
    team = record.job_id.removeprefix(TEAM_PREFIX)
    wiring = wiring_for(settings)
    notification = compose_team_notice(team, record)
    targets: list[tuple[str, str, str]] = []  # (who, channel, target)
    for member in sorted(wiring.budgets.members_of(team)):
        channels = channels_for(settings, member, None)
        if BUDGET_TOPIC not in channels.topics or happened_before(record.at, channels.since):
            continue
        targets += [
            (member, name, t)
            for name, t in (("slack", channels.slack_webhook), ("email", channels.email))
            if t
        ]
    webhook = _team_channel_url(settings, team)
    if webhook:
        targets.append((TEAM_CHANNEL, "slack", webhook))
    deliveries = []
    for who, channel, target in targets:
        key = f"sent#{record.job_id}#{record.at}#{channel}#{who}"
        if not wiring.notifications.claim_send(key):
            continue
        delivery = deliver(settings, channel, target, notification)
        wiring.notifications.finish_send(key, ok=delivery.ok, attempts=delivery.attempts)
        status = "sent" if delivery.ok else "failed"
        detail = {**delivery.as_dict(), "topic": BUDGET_TOPIC, "event": record.at, "to": who}
        text = f"{channel} notification {status} to {who} (budget)"
        wiring.store.note(record.job_id, NOTIFY_KIND, text, detail=detail)
        log.info("team %s budget %s notification to %s: %s", team, channel, who, status)
        deliveries.append(delivery)
    return deliveries
