"""What a task may read or write in storage: the one rule, asked at submit (jobs, uploads, schedules, named
clusters and exec alike) and again each time a node asks for credentials.

- skyless's own bucket is never a mount source, in any spelling: `s3://b`, `s3://b/`, `s3://B/k`, the same
  name under another store's scheme, `https://` path and virtual-host forms (presigned or not), a storage
  object's `name:` or `source:`, and on the local runtime any URL of the storage endpoint itself.
- a bucket (or a prefix of it) is usable by a user only when it is theirs (skyless created it for them: the
  storage registry) or an admin granted it to them or to one of their teams; read-only unless the grant
  allows writing. A `name:` bucket nobody holds may be created for the user (it becomes theirs).
- everything else is refused with the field, and the hint names the admin command that grants it.

The rule works on (store, bucket, prefix) whatever the store: a backend added for another store is judged
the same way as soon as shared.storage.specs reads its URLs.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from shared.errors import UserError
from shared.store.tenancy import Grant

WEB_SCHEMES = ("http", "https")


class TenancyFacts(Protocol):
    """What the rule reads about a bucket and a user (the registry and the grants; in tests, a dict)."""

    def owner_of(self, bucket: str) -> str | None: ...

    def grants_on(self, bucket: str) -> list[Grant]: ...

    def teams_of(self, user_id: str) -> set[str]: ...


@dataclass(frozen=True)
class BucketUse:
    """One mount's ask of a bucket."""

    field: str  # file_mounts.<path>
    bucket: str
    prefix: str
    write: bool  # the task's changes go back to the bucket
    managed: bool  # a storage object's `name:`: skyless may create it for the user


@dataclass(frozen=True)
class Reach:
    """What the user may do with a bucket use: how it was allowed and whether writes are refused."""

    read_only: bool
    via: str  # "owner", "new" (a bucket skyless will create for them), "user:<id>" or "team:<name>"


@dataclass(frozen=True)
class StorageWalls:
    """The deployment's side of the rule: its own bucket, its storage endpoint, the bucket names it uses."""

    skyless_bucket: str
    endpoint_url: str | None = None
    allowed_buckets: tuple[str, ...] = field(default=())  # name patterns (`ml-*`); () = any

    @classmethod
    def of(cls, settings: Any) -> StorageWalls:
        from shared.config.channels import StorageConfig

        allowed = StorageConfig.from_env().allowed_buckets or ""
        patterns = tuple(p.strip() for p in allowed.split(",") if p.strip())
        return cls(settings.bucket, settings.endpoint_url, patterns)


# -- spellings of skyless's own bucket ----------------------------------------------------------------------


def _is_name_of(name: str, bucket: str) -> bool:
    """`name` (as a URL spells it) is `bucket`: any case, percent-encoded, a trailing dot, a host under it."""
    name = unquote(name).strip().lower().rstrip(".")
    return name == bucket or name.startswith(bucket + ".")


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the shorthand forms inet_aton takes: 127.1, 0x7f.0.0.1, 2130706433
            address = ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return False
    return address.is_loopback or address.is_unspecified


def _port(scheme: str, port: int | None) -> int:
    return port if port is not None else (443 if scheme == "https" else 80)


def _same_endpoint(url: Any, endpoint_url: str | None) -> bool:
    if not endpoint_url:
        return False
    ours = urlsplit(endpoint_url)
    try:
        if _port(url.scheme, url.port) != _port(ours.scheme, ours.port):
            return False
    except ValueError:  # a port that is not a number: no endpoint of ours
        return False
    host, mine = (url.hostname or ""), (ours.hostname or "")
    return host == mine or (_loopback(host) and _loopback(mine))


def names_skyless_bucket(source: str, walls: StorageWalls) -> bool:
    """`source` (a file_mounts value or a storage object's source) reaches skyless's own bucket."""
    bucket = walls.skyless_bucket.lower()
    scheme, sep, rest = source.strip().partition("://")
    if not sep:
        return False  # a local path
    scheme = scheme.lower()
    if scheme not in WEB_SCHEMES:
        return _is_name_of(rest.split("/", 1)[0].split("?", 1)[0], bucket)
    try:
        url = urlsplit(source.strip())
    except ValueError:
        return True  # unparseable: refused rather than guessed
    if _is_name_of(url.hostname or "", bucket) or _same_endpoint(url, walls.endpoint_url):
        return True
    segments = [s for s in unquote(url.path).split("/") if s not in ("", ".")]
    return bool(segments) and _is_name_of(segments[0], bucket)


def refuse_skyless_bucket(field_path: str, filename: str | None = None) -> UserError:
    return UserError(
        "skyless's own bucket (run data, uploads, every user's secrets) is never a mount source",
        file=filename,
        field=field_path,
        hint="mount a local path (skyless uploads it) or a bucket of your own",
    )


# -- the rule ------------------------------------------------------------------------------------------


def grant_command(bucket: str, prefix: str, user_id: str, *, write: bool = False) -> str:
    words = ["skyless admin buckets grant", bucket, "--user", user_id]
    if prefix:
        words += ["--prefix", prefix]
    if write:
        words.append("--write")
    return " ".join(words)


def reach(use: BucketUse, *, user_id: str, facts: TenancyFacts, walls: StorageWalls) -> Reach:
    """Whether `user_id` may use `use`, and how; a UserError naming the field (and the grant that would
    allow it) when not."""
    if _is_name_of(use.bucket, walls.skyless_bucket.lower()):
        raise refuse_skyless_bucket(use.field)
    if ".." in use.prefix.split("/") or "//" in use.prefix:
        raise UserError("a bucket prefix may not hold '..' or empty parts", field=use.field)
    if walls.allowed_buckets and not any(fnmatch.fnmatchcase(use.bucket, p) for p in walls.allowed_buckets):
        raise UserError(
            f"this deployment reaches only buckets named {', '.join(walls.allowed_buckets)}",
            field=use.field,
            hint="its StorageBuckets parameter says which; ask whoever deployed skyless",
        )
    owner = facts.owner_of(use.bucket)
    if owner == user_id:
        return Reach(read_only=not use.write, via="owner")
    grantees = {f"user:{user_id}", *(f"team:{team}" for team in facts.teams_of(user_id))}
    every_grant = facts.grants_on(use.bucket)
    grants = [g for g in every_grant if g.grantee in grantees and g.covers(use.prefix)]
    if grants:
        writable = [g for g in grants if g.write]
        if use.write and not writable:
            raise UserError(
                f"bucket {use.bucket} is granted to you read-only",
                field=use.field,
                hint="mount it read-only (mode: COPY, or config.mount.read_only: true), or ask an admin: "
                + grant_command(use.bucket, use.prefix, user_id, write=True),
            )
        chosen = (writable or grants)[0]
        return Reach(read_only=not (use.write and chosen.write), via=chosen.grantee)
    hint = "ask an admin: " + grant_command(use.bucket, use.prefix, user_id, write=use.write)
    if owner is not None:
        raise UserError(f"bucket {use.bucket} belongs to another skyless user", field=use.field, hint=hint)
    if use.managed and not every_grant:  # a granted bucket exists: a `name:` for it creates nothing
        return Reach(read_only=not use.write, via="new")
    raise UserError(f"bucket {use.bucket} is not yours and not granted to you", field=use.field, hint=hint)


class RegistryFacts:
    """The rule's facts from the storage registry and the tenancy table (each user's teams read once)."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self._teams: dict[str, set[str]] = {}

    def owner_of(self, bucket: str) -> str | None:
        from shared.storage.registry import find_bucket

        record = find_bucket(self.settings, bucket)
        return record.owner if record is not None else None

    def grants_on(self, bucket: str) -> list[Grant]:
        from shared.store.tenancy import grants_on

        return grants_on(self.settings, bucket)

    def teams_of(self, user_id: str) -> set[str]:
        from shared.store.tenancy import teams_of

        if user_id not in self._teams:
            self._teams[user_id] = teams_of(self.settings, user_id)
        return self._teams[user_id]
