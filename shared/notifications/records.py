"""The notifications table: per-user settings, per-job overrides, and one record per send.

Keys (`pk`): `user#<owner>`, `job#<job id>`, `sent#<job id>#<v<version> | event at>#<channel>`.
Webhook URLs are never stored here: `slack_secret` is the name of a Secrets Manager secret that holds the URL.
"""

from __future__ import annotations

import time
from functools import cache

from pynamodb.attributes import ListAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist, PutError
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

TABLE_KIND = "notifications"


class NotificationItem(Model):
    class Meta:
        table_name = "unbound-notifications"

    pk = UnicodeAttribute(hash_key=True)
    slack_secret = UnicodeAttribute(null=True)  # a secret's name, never the URL
    email = UnicodeAttribute(null=True)
    topics = ListAttribute(of=UnicodeAttribute, null=True)  # None = the defaults
    status = UnicodeAttribute(null=True)  # sends: sending | sent | failed
    attempts = NumberAttribute(null=True)
    updated_at = NumberAttribute(default=0)


@cache
def notifications_model(settings: Settings) -> type[NotificationItem]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name(TABLE_KIND),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    model = type(f"NotificationItem_{settings.prefix}", (NotificationItem,), {"Meta": meta})
    return with_shared_session(model)


def ensure_notifications_table(settings: Settings) -> None:
    model = notifications_model(settings)
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def read_item(settings: Settings, pk: str) -> NotificationItem | None:
    try:
        return notifications_model(settings).get(pk, consistent_read=True)
    except DoesNotExist:
        return None


def send_key(job_id: str, event_at: str, channel: str) -> str:
    """A state event's `at` ends in `#v<version>`: one version is one transition, so two events carrying it
    (a transaction that half-applied under a race) are one notification. Other events: their own `at`."""
    _, _, suffix = event_at.partition("#")
    identity = suffix if suffix.startswith("v") else event_at
    return f"sent#{job_id}#{identity}#{channel}"


def claim_send(settings: Settings, key: str) -> bool:
    """Take the right to make one send (conditional put); False when it was taken before (a redelivery)."""
    model = notifications_model(settings)
    item = model(pk=key, status="sending", attempts=0, updated_at=time.time())
    try:
        item.save(condition=model.pk.does_not_exist())
    except PutError as error:
        if "ConditionalCheckFailed" in str(getattr(error, "cause_response_code", "") or error):
            return False
        raise
    return True


def finish_send(settings: Settings, key: str, *, ok: bool, attempts: int) -> None:
    model = notifications_model(settings)
    model(pk=key, status="sent" if ok else "failed", attempts=attempts, updated_at=time.time()).save()
