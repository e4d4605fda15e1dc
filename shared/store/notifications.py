"""The notifications table: per-user settings, per-job overrides, and one record per send; the
`NotificationStore` port (shared/notifications/ asks it) and its DynamoDB adapter.
`shared.store.memory_records.MemoryNotificationStore` keeps the same conditions in memory;
tests/unit/test_notification_store_contract.py holds both to one contract.

Keys (`pk`): `user#<owner>`, `job#<job id>`, `sent#<job id>#<v<version> | event at>#<channel>`.
Webhook URLs are never stored here: `slack_secret` is the name of a Secrets Manager secret that holds the URL.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any, Protocol

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


class NotificationStore(Protocol):
    def new_item(self, pk: str, **fields: Any) -> NotificationItem:
        """An unsaved item (`save` writes it)."""
        ...

    def read(self, pk: str) -> NotificationItem | None:
        """The item, read consistently; None when there is none."""
        ...

    def save(self, item: NotificationItem) -> None:
        """Write the whole item (a settings change or override: the last write wins)."""
        ...

    def claim_send(self, key: str) -> bool:
        """Take the right to make one send: write `sending` unless the key exists; False (nothing written)
        when it was taken before (a redelivery)."""
        ...

    def finish_send(self, key: str, *, ok: bool, attempts: int) -> None:
        """Record how a claimed send ended (`sent` | `failed`)."""
        ...


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


class DynamoNotificationStore:
    def __init__(self, settings: Settings) -> None:
        self.model = notifications_model(settings)

    def new_item(self, pk: str, **fields: Any) -> NotificationItem:
        return self.model(pk=pk, **fields)

    def read(self, pk: str) -> NotificationItem | None:
        try:
            return self.model.get(pk, consistent_read=True)
        except DoesNotExist:
            return None

    def save(self, item: NotificationItem) -> None:
        item.save()

    def claim_send(self, key: str) -> bool:
        item = self.model(pk=key, status="sending", attempts=0, updated_at=time.time())
        try:
            item.save(condition=self.model.pk.does_not_exist())
        except PutError as error:
            if "ConditionalCheckFailed" in str(getattr(error, "cause_response_code", "") or error):
                return False
            raise
        return True

    def finish_send(self, key: str, *, ok: bool, attempts: int) -> None:
        self.model(
            pk=key, status="sent" if ok else "failed", attempts=attempts, updated_at=time.time()
        ).save()
