"""The admin's operations on users, teams and bucket grants. Each checks its input, makes one idempotent
change and appends what it did to the audit log; a change that was already made (a second grant, a member
added twice) is answered as it is and logged once, so a retried request leaves one audit entry.

Crash window: the change is made before its audit entry is written; a process that dies between the two
leaves a change without its entry. Entries are written after, not before, so the log never claims a change
that did not happen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.config import Settings
from shared.errors import ConflictError, NotFoundError, UserError
from shared.storage.access import StorageWalls, names_skyless_bucket
from shared.storage.registry import BucketRecord, all_buckets
from shared.store import tenancy
from shared.store.audit import AuditEntry, append_audit, read_audit
from shared.store.tenancy import TEAM_NAME, Grant
from shared.store.users import UserSummary, create_user, find_user, list_users, revoke_user

BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
MAX_AUDIT_ENTRIES = 1000


@dataclass(frozen=True)
class NewUser:
    user_id: str
    name: str
    admin: bool
    api_key: str  # shown once


def _audit(settings: Settings, actor: str, action: str, target: str, **detail: Any) -> None:
    append_audit(settings, actor=actor, action=action, target=target, detail=detail or None)


def _known_user(settings: Settings, user_id: str, field: str) -> UserSummary:
    for user in list_users(settings):
        if user.user_id == user_id:
            return user
    raise NotFoundError(f"no user {user_id}", field=field, hint="`skyless admin users list` shows them")


def _team_name(team: str) -> str:
    if not TEAM_NAME.match(team):
        raise UserError(
            "a team name is 1-63 lowercase letters, digits and hyphens, starting with a letter or digit",
            field="team",
        )
    return team


# -- users ------------------------------------------------------------------------------------------------


def add_user(settings: Settings, *, actor: str, name: str, admin: bool = False) -> NewUser:
    name = name.strip()
    if not name or len(name) > 64 or not name.isprintable():
        raise UserError("a user's name is 1-64 printable characters", field="name")
    key = create_user(name, settings, admin=admin)
    user = find_user(key, settings)
    assert user is not None
    _audit(settings, actor, "users.create", user.user_id, name=name, admin=admin)
    return NewUser(user.user_id, name, admin, key)


def users(settings: Settings) -> list[UserSummary]:
    return list_users(settings)


def remove_user(settings: Settings, *, actor: str, user_id: str) -> int:
    """Revoke every key of `user_id` (their jobs, buckets and grants stay; nothing can use them)."""
    if user_id == actor:
        raise UserError("you cannot revoke yourself", field="user_id", hint="another admin can")
    revoked = revoke_user(user_id, settings)
    if revoked == 0:
        raise NotFoundError(f"no user {user_id} holds a key", field="user_id")
    _audit(settings, actor, "users.revoke", user_id, keys=revoked)
    return revoked


# -- teams ------------------------------------------------------------------------------------------------


def add_team(settings: Settings, *, actor: str, team: str) -> None:
    if not tenancy.create_team(settings, _team_name(team), by=actor):
        raise ConflictError(f"team {team} exists", field="team")
    _audit(settings, actor, "teams.create", team)


def add_member(
    settings: Settings, *, actor: str, team: str, user_id: str, team_admin: bool | None = None
) -> bool:
    """False when `user_id` was a member already. `team_admin` True or False makes the member the team's
    admin (who may set its budget) or not; None leaves that as it is."""
    if not tenancy.team_exists(settings, _team_name(team)):
        raise NotFoundError(f"no team {team}", field="team", hint="`skyless admin teams create` makes one")
    _known_user(settings, user_id, "user_id")
    added = tenancy.add_member(settings, team, user_id, by=actor)
    if added:
        _audit(settings, actor, "teams.add", team, user_id=user_id)
    if team_admin is not None and tenancy.set_team_admin(settings, team, user_id, team_admin):
        _audit(settings, actor, "teams.admin", team, user_id=user_id, team_admin=team_admin)
    return added


def remove_member(settings: Settings, *, actor: str, team: str, user_id: str) -> None:
    if not tenancy.remove_member(settings, _team_name(team), user_id):
        raise NotFoundError(f"{user_id} is not a member of team {team}", field="user_id")
    _audit(settings, actor, "teams.remove", team, user_id=user_id)


def teams(settings: Settings) -> dict[str, set[str]]:
    return tenancy.all_teams(settings)


# -- bucket grants ------------------------------------------------------------------------------------------


def _grant_of(settings: Settings, bucket: str, user: str | None, team: str | None, prefix: str, write: bool,
              actor: str) -> Grant:  # fmt: skip
    if (user is None) == (team is None):
        raise UserError("grant to a user or to a team (one of them)", field="user")
    if not BUCKET_NAME.match(bucket) or ".." in bucket:
        raise UserError(f"{bucket!r} is not a valid bucket name", field="bucket")
    if names_skyless_bucket(f"s3://{bucket}", StorageWalls.of(settings)):
        raise UserError("skyless's own bucket is never granted", field="bucket")
    prefix = prefix.strip("/")
    if ".." in prefix.split("/") or "//" in prefix:
        raise UserError("a prefix may not hold '..' or empty parts", field="prefix")
    if user is not None:
        _known_user(settings, user, "user")
        grantee = f"user:{user}"
    else:
        if not tenancy.team_exists(settings, _team_name(team or "")):
            raise NotFoundError(f"no team {team}", field="team")
        grantee = f"team:{team}"
    return Grant(bucket, grantee, prefix, write, actor)


def grant_bucket(settings: Settings, *, actor: str, bucket: str, user: str | None = None,
                 team: str | None = None, prefix: str = "", write: bool = False) -> Grant:  # fmt: skip
    grant = _grant_of(settings, bucket, user, team, prefix, write, actor)
    if tenancy.put_grant(settings, grant):
        _audit(
            settings, actor, "buckets.grant", bucket, grantee=grant.grantee, prefix=grant.prefix, write=write
        )
    return grant


def revoke_bucket(settings: Settings, *, actor: str, bucket: str, user: str | None = None,
                  team: str | None = None, prefix: str = "") -> None:  # fmt: skip
    grantee = f"user:{user}" if user is not None else f"team:{team}"
    if (user is None) == (team is None):
        raise UserError("revoke from a user or from a team (one of them)", field="user")
    if not tenancy.delete_grant(settings, bucket, grantee, prefix.strip("/")):
        raise NotFoundError(f"no grant of {bucket} to {grantee}", field="bucket",
                            hint="`skyless admin buckets list` shows the grants")  # fmt: skip
    _audit(settings, actor, "buckets.revoke", bucket, grantee=grantee, prefix=prefix.strip("/"))


def bucket_grants(settings: Settings) -> list[Grant]:
    return tenancy.all_grants(settings)


def owned_buckets(settings: Settings) -> list[BucketRecord]:
    return all_buckets(settings)


def audit(settings: Settings, *, limit: int = 100) -> list[AuditEntry]:
    if not 1 <= limit <= MAX_AUDIT_ENTRIES:
        raise UserError(f"must be 1-{MAX_AUDIT_ENTRIES}", field="limit")
    return read_audit(settings, limit=limit)
