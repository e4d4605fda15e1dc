"""Teams, their members, and the bucket grants an admin gives to a user or a team. One table, keyed `pk`/`sk`:

    team#<team>       team                  the team (who made it, when)
    team#<team>       member#<user id>      a member (`team_admin`: may set the team's budget)
    user#<user id>    team#<team>           the same membership, read from the user's side (teams_of)
    bucket#<bucket>   grant#<grantee>#<p>   a grant of `bucket` (prefix p, "" for all of it) to
                                            `user:<id>` or `team:<name>`, read-only unless `write`

A membership's two items are written (and deleted) in one transaction. Every write is idempotent: adding a
member twice, or granting what is granted, changes nothing and answers False. What a grant lets a task do is
shared/storage/access.py's to decide; this module only stores.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import cache

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.exceptions import DeleteError, PutError, TransactWriteError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from shared.config import Settings
from shared.store.models import with_shared_session

TEAM_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class TenancyModel(Model):
    class Meta:
        table_name = "unbound-tenancy"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    created_at = NumberAttribute(default=0)
    created_by = UnicodeAttribute(null=True)
    prefix = UnicodeAttribute(null=True)  # a grant's part of the bucket ("" all of it)
    write = BooleanAttribute(null=True)  # a grant that lets tasks write
    team_admin = BooleanAttribute(null=True)  # a member who administers the team (its budget)


@dataclass(frozen=True)
class Grant:
    bucket: str
    grantee: str  # "user:<id>" or "team:<name>"
    prefix: str  # "" for the whole bucket, else "a/b" (no leading or trailing slash)
    write: bool
    granted_by: str | None = None

    def covers(self, prefix: str) -> bool:
        """The mounted part `prefix` lies within this grant's part of the bucket."""
        return not self.prefix or prefix == self.prefix or prefix.startswith(self.prefix + "/")


@cache
def tenancy_model(settings: Settings) -> type[TenancyModel]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("tenancy"),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    return with_shared_session(type(f"TenancyModel_{settings.prefix}", (TenancyModel,), {"Meta": meta}))


def ensure_tenancy_table(settings: Settings) -> None:
    model = tenancy_model(settings)
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def _connection(settings: Settings) -> Connection:
    return Connection(region=settings.region, host=settings.endpoint_url)


# -- teams --------------------------------------------------------------------------------------------------


def create_team(settings: Settings, team: str, *, by: str) -> bool:
    """Record `team`; False when it exists already."""
    model = tenancy_model(settings)
    try:
        model(pk=f"team#{team}", sk="team", created_at=time.time(), created_by=by).save(
            condition=model.pk.does_not_exist()
        )
    except PutError:
        return False
    return True


def team_exists(settings: Settings, team: str) -> bool:
    model = tenancy_model(settings)
    try:
        model.get(f"team#{team}", "team", consistent_read=True)
    except model.DoesNotExist:
        return False
    return True


def add_member(settings: Settings, team: str, user_id: str, *, by: str) -> bool:
    """`user_id` joins `team` (which must exist); False when already a member or the team is gone."""
    model = tenancy_model(settings)
    now = time.time()
    try:
        with TransactWrite(connection=_connection(settings)) as transaction:
            transaction.condition_check(model, f"team#{team}", "team", condition=model.pk.exists())
            transaction.save(
                model(pk=f"team#{team}", sk=f"member#{user_id}", created_at=now, created_by=by),
                condition=model.pk.does_not_exist(),
            )
            transaction.save(
                model(pk=f"user#{user_id}", sk=f"team#{team}", created_at=now, created_by=by),
                condition=model.pk.does_not_exist(),
            )
    except TransactWriteError:
        return False
    return True


def remove_member(settings: Settings, team: str, user_id: str) -> bool:
    """`user_id` leaves `team`; False when not a member."""
    model = tenancy_model(settings)
    try:
        with TransactWrite(connection=_connection(settings)) as transaction:
            transaction.delete(model(pk=f"team#{team}", sk=f"member#{user_id}"), condition=model.pk.exists())
            transaction.delete(model(pk=f"user#{user_id}", sk=f"team#{team}"))
    except TransactWriteError:
        return False
    return True


def set_team_admin(settings: Settings, team: str, user_id: str, admin: bool) -> bool:
    """Make a member the team's admin (or not); False when `user_id` is no member or already was so."""
    model = tenancy_model(settings)
    member = model(pk=f"team#{team}", sk=f"member#{user_id}")
    is_admin = model.team_admin == True  # noqa: E712 (a DynamoDB condition, not a comparison)
    condition = model.pk.exists() & (~is_admin if admin else is_admin)
    try:
        member.update(actions=[model.team_admin.set(admin)], condition=condition)
    except UpdateError:
        return False
    return True


def is_team_admin(settings: Settings, team: str, user_id: str) -> bool:
    model = tenancy_model(settings)
    try:
        return bool(model.get(f"team#{team}", f"member#{user_id}", consistent_read=True).team_admin)
    except model.DoesNotExist:
        return False


def teams_of(settings: Settings, user_id: str) -> set[str]:
    model = tenancy_model(settings)
    return {
        item.sk.removeprefix("team#")
        for item in model.query(f"user#{user_id}", model.sk.startswith("team#"), consistent_read=True)
    }


def members_of(settings: Settings, team: str) -> set[str]:
    model = tenancy_model(settings)
    return {
        item.sk.removeprefix("member#")
        for item in model.query(f"team#{team}", model.sk.startswith("member#"), consistent_read=True)
    }


def all_teams(settings: Settings) -> dict[str, set[str]]:
    """team -> members, for the admin's listing (a scan: teams are few, and only an admin asks)."""
    model = tenancy_model(settings)
    teams: dict[str, set[str]] = {}
    for item in model.scan(model.pk.startswith("team#")):
        members = teams.setdefault(item.pk.removeprefix("team#"), set())
        if item.sk.startswith("member#"):
            members.add(item.sk.removeprefix("member#"))
    return teams


# -- grants -------------------------------------------------------------------------------------------------


def _grant_sk(grantee: str, prefix: str) -> str:
    return f"grant#{grantee}#{prefix}"


def put_grant(settings: Settings, grant: Grant) -> bool:
    """Record `grant`; False when that exact grant (grantee, prefix, write) is already there. A grant of the
    same grantee and prefix with another `write` is replaced."""
    model = tenancy_model(settings)
    item = model(
        pk=f"bucket#{grant.bucket}",
        sk=_grant_sk(grant.grantee, grant.prefix),
        created_at=time.time(),
        created_by=grant.granted_by,
        prefix=grant.prefix,
        write=grant.write,
    )
    try:
        item.save(condition=model.pk.does_not_exist() | (model.write != grant.write))
    except PutError:
        return False
    return True


def delete_grant(settings: Settings, bucket: str, grantee: str, prefix: str) -> bool:
    model = tenancy_model(settings)
    try:
        model(pk=f"bucket#{bucket}", sk=_grant_sk(grantee, prefix)).delete(condition=model.pk.exists())
    except DeleteError:
        return False
    return True


def _grant_of(item: TenancyModel) -> Grant:
    prefix = item.prefix or ""
    grantee = item.sk.removeprefix("grant#")[: -len(prefix) - 1]
    return Grant(item.pk.removeprefix("bucket#"), grantee, prefix, bool(item.write), item.created_by)


def grants_on(settings: Settings, bucket: str) -> list[Grant]:
    model = tenancy_model(settings)
    query = model.query(f"bucket#{bucket}", model.sk.startswith("grant#"), consistent_read=True)
    return [_grant_of(item) for item in query]


def all_grants(settings: Settings) -> list[Grant]:
    """Every grant, for the admin's listing (a scan, as all_teams)."""
    model = tenancy_model(settings)
    return sorted(
        (_grant_of(item) for item in model.scan(model.pk.startswith("bucket#"))),
        key=lambda g: (g.bucket, g.grantee, g.prefix),
    )
