"""Users and their API keys. A key is stored only as its SHA-256 hash; the clear key is shown once.

Admins manage users with `skyless admin users create|list|revoke` (the /admin routes). The first admin of a
deployed stack is made here, with AWS credentials for its account and `SKYLESS_PREFIX` set:

    python -m shared.store.users create lead --admin   # prints the new admin key, once
    python -m shared.store.users revoke <api key>

An admin key may administer users, teams and bucket grants, read cost reports across users
(`GET /costs?all_users=true`) and list every user's jobs and clusters (`GET /jobs?all_users=true`,
`GET /clusters?all_users=true`: `skyless status -u`); it changes no other user's job or cluster. The admin
flag belongs to the key, so a user can hold an ordinary key and an admin one.

The local runtime calls `create_user("local")` when it first starts.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
import sys
import time
from dataclasses import dataclass
from functools import cache

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, PutError, QueryError, UpdateError
from pynamodb.indexes import GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session


class UserIdIndex(GlobalSecondaryIndex["UserKeyModel"]):
    """A user's keys by user id: whether a user exists is one Query of at most one item."""

    class Meta:
        index_name = "user-id-index"
        projection = KeysOnlyProjection()

    user_id = UnicodeAttribute(hash_key=True)


class UserKeyModel(Model):
    """One API key (by hash) and the user it belongs to. A user may hold several keys."""

    class Meta:
        table_name = "unbound-users"

    key_hash = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute()
    name = UnicodeAttribute()
    created_at = NumberAttribute()
    admin = BooleanAttribute(null=True)
    # Dashboard sessions of this key signed at or before this time (ms since the epoch) are signed out.
    sessions_ended_ms = NumberAttribute(null=True)


API_KEY_PREFIX = "sky_"


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(api_key: str) -> str:
    """SHA-256 hex: the only form in which a key is stored."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class User:
    user_id: str
    name: str
    admin: bool = False


@cache
def users_model(settings: Settings) -> type[UserKeyModel]:
    by_user = type(f"UserIdIndex_{settings.prefix}", (UserIdIndex,), {})()
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("users"),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    model = type(f"UserKeyModel_{settings.prefix}", (UserKeyModel,), {"Meta": meta, "by_user": by_user})
    return with_shared_session(model)


def ensure_users_table(settings: Settings) -> None:
    model = users_model(settings)
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def create_user(
    name: str, settings: Settings | None = None, *, user_id: str | None = None, admin: bool = False
) -> str:
    """Record a user (or a new key for `user_id`) and answer the API key in clear; only its hash is kept."""
    settings = settings or Settings.from_env()
    name = name.strip()
    if not name:
        raise ValueError("a user needs a name")
    model = users_model(settings)
    for _ in range(3):
        key = new_api_key()
        record = model(
            key_hash=hash_api_key(key),
            user_id=user_id or f"u-{secrets.token_hex(8)}",
            name=name,
            created_at=int(time.time()),
            admin=admin or None,
        )
        try:
            record.save(condition=model.key_hash.does_not_exist())
        except PutError:  # a hash collision with an existing key: draw another
            continue
        return key
    raise RuntimeError("could not record a new API key")


def find_user(api_key: str, settings: Settings) -> User | None:
    """The user holding `api_key`, or None."""
    return find_user_by_key_hash(hash_api_key(api_key), settings)


def find_user_by_key_hash(key_hash: str, settings: Settings) -> User | None:
    """The user holding the key whose hash this is (a revoked key: None)."""
    try:
        record = users_model(settings).get(key_hash)
    except users_model(settings).DoesNotExist:
        return None
    return User(user_id=record.user_id, name=record.name, admin=bool(record.admin))


MAX_USER_ID_CHARS = 128


def user_exists(user_id: str, settings: Settings) -> bool:
    """Whether `user_id` holds a live key (a user whose every key was revoked is no user): one Query of the
    user-id index, reading at most one item. A table made before the index (an older local runtime's
    state) is scanned instead."""
    if not user_id or len(user_id) > MAX_USER_ID_CHARS:
        return False
    model = users_model(settings)
    try:
        return any(True for _ in model.by_user.query(user_id, limit=1))  # type: ignore[attr-defined]
    except QueryError as error:
        if "index" not in str(error.cause or error).lower():
            raise
    return any(True for _ in model.scan(model.user_id == user_id))


def find_key(key_hash: str, settings: Settings) -> tuple[User, int | None] | None:
    """(the user holding the key whose hash this is, when its dashboard sessions were last ended), or None
    for a revoked key. One read: what every dashboard request asks."""
    try:
        record = users_model(settings).get(key_hash)
    except users_model(settings).DoesNotExist:
        return None
    ended = int(record.sessions_ended_ms) if record.sessions_ended_ms is not None else None
    return User(user_id=record.user_id, name=record.name, admin=bool(record.admin)), ended


def end_sessions(key_hash: str, at_ms: int, settings: Settings) -> None:
    """Sign out every dashboard session of this key signed at or before `at_ms`. Conditional on the key's
    record (a revoked key is not written back); never moves the time backwards, so a late or repeated
    sign-out changes nothing."""
    model = users_model(settings)
    condition = model.key_hash.exists() & (
        model.sessions_ended_ms.does_not_exist() | (model.sessions_ended_ms < at_ms)
    )
    try:
        model(key_hash=key_hash).update(actions=[model.sessions_ended_ms.set(at_ms)], condition=condition)
    except UpdateError as error:
        if error.cause_response_code != "ConditionalCheckFailedException":
            raise


def user_names(settings: Settings) -> dict[str, str]:
    """user id -> name, for reports across users (a scan of the users table: one row per key)."""
    return {record.user_id: record.name for record in users_model(settings).scan()}


@dataclass(frozen=True)
class UserSummary:
    user_id: str
    name: str
    admin: bool  # holds at least one admin key
    keys: int
    created_at: int


def list_users(settings: Settings) -> list[UserSummary]:
    """Every user with a live key, oldest first (a scan of the users table: for an admin's listing)."""
    found: dict[str, UserSummary] = {}
    for record in users_model(settings).scan():
        seen = found.get(record.user_id)
        found[record.user_id] = UserSummary(
            record.user_id,
            seen.name if seen else record.name,
            bool(record.admin) or (seen.admin if seen else False),
            (seen.keys if seen else 0) + 1,
            min(int(record.created_at), seen.created_at if seen else int(record.created_at)),
        )
    return sorted(found.values(), key=lambda u: (u.created_at, u.user_id))


def revoke_user(user_id: str, settings: Settings) -> int:
    """Forget every key of `user_id`; answer how many there were. Idempotent (a second call answers 0)."""
    model = users_model(settings)
    revoked = 0
    for record in model.scan(model.user_id == user_id):
        try:
            record.delete(condition=model.key_hash.exists())
        except DeleteError:
            continue
        revoked += 1
    return revoked


def revoke_key(api_key: str, settings: Settings) -> bool:
    """Forget `api_key`; answer whether it existed."""
    model = users_model(settings)
    try:
        model(key_hash=hash_api_key(api_key)).delete(condition=model.key_hash.exists())
    except DeleteError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.store.users", description="Manage skyless users.")
    verbs = parser.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", help="create a user and print a new API key")
    create.add_argument("name")
    create.add_argument("--admin", action="store_true", help="the key may read every user's cost report")
    revoke = verbs.add_parser("revoke", help="revoke an API key")
    revoke.add_argument("api_key")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    ensure_users_table(settings)
    if args.verb == "create":
        print(create_user(args.name, settings, admin=args.admin))
        return 0
    if revoke_key(args.api_key, settings):
        print("revoked")
        return 0
    print("no such key", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
