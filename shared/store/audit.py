"""The admin audit log: every user, team and grant change, appended, never changed.

Table `<prefix>-audit`, one partition (`pk` "audit"; admin changes are few), `sk` the time in milliseconds
and a random suffix, so entries sort by time and two at the same millisecond both land. Entries are only
put, with a condition that nothing holds their key; the deployed API role may put and query this table and
nothing else (infra/template.yaml), so not even the API can rewrite history.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

PARTITION = "audit"


class AuditModel(Model):
    class Meta:
        table_name = "unbound-audit"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    at = NumberAttribute()
    actor = UnicodeAttribute()  # the admin's user id
    action = UnicodeAttribute()  # "users.create", "buckets.grant", ...
    target = UnicodeAttribute()
    detail = UnicodeAttribute(null=True)  # JSON


@dataclass(frozen=True)
class AuditEntry:
    at: float
    actor: str
    action: str
    target: str
    detail: dict[str, Any]


@cache
def audit_model(settings: Settings) -> type[AuditModel]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("audit"),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    return with_shared_session(type(f"AuditModel_{settings.prefix}", (AuditModel,), {"Meta": meta}))


def ensure_audit_table(settings: Settings) -> None:
    model = audit_model(settings)
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def append_audit(
    settings: Settings, *, actor: str, action: str, target: str, detail: dict[str, Any] | None = None
) -> AuditEntry:
    model = audit_model(settings)
    now = time.time()
    item = model(
        pk=PARTITION,
        sk=f"{int(now * 1000):015d}#{secrets.token_hex(4)}",
        at=now,
        actor=actor,
        action=action,
        target=target,
        detail=json.dumps(detail, sort_keys=True) if detail else None,
    )
    item.save(condition=model.sk.does_not_exist())
    return AuditEntry(now, actor, action, target, detail or {})


def read_audit(settings: Settings, *, limit: int = 100) -> list[AuditEntry]:
    """The newest `limit` entries, newest first (one query: reads `limit` items, whatever the log's size)."""
    model = audit_model(settings)
    items = model.query(PARTITION, scan_index_forward=False, limit=limit, page_size=limit)
    return [
        AuditEntry(item.at, item.actor, item.action, item.target, json.loads(item.detail or "{}"))
        for item in items
    ]
