"""Who is calling: a user by API key, or a job's node agent by the job's token. Both stored only hashed."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from shared.config import Settings
from shared.errors import AuthError, UserError
from shared.store.users import User, find_user
from shared.wiring import wiring_for


class StaleAttemptError(UserError):
    """A node agent of an attempt its job has moved past (a recovery, a restart, a pipeline's next step).
    Answered with 410 and `"stop": true`: the agent kills its task's process group and exits."""

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "stop": True}


MAX_STALE_ATTEMPTS_CHECKED = 1000  # attempts older than this are refused as unknown credentials


def hash_secret(secret: str) -> str:
    """SHA-256 hex, the form in which job tokens are stored."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secret_matches(secret: str, stored_hash: str | None) -> bool:
    if not stored_hash:
        return False
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def bearer_token(headers: Mapping[str, str]) -> str:
    """The token of an `Authorization: Bearer <token>` header, or AuthError."""
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthError(
            "missing or malformed credentials",
            field="Authorization",
            hint="send the header 'Authorization: Bearer <api key>'",
        )
    if len(token) > 512:
        raise AuthError("credentials not recognised", field="Authorization")
    return token


def authenticate_user(headers: Mapping[str, str], settings: Settings) -> User:
    user = find_user(bearer_token(headers), settings)
    if user is None:
        raise AuthError("credentials not recognised", field="Authorization")
    return user


def authenticate_agent(headers: Mapping[str, str], job_id: str, settings: Settings) -> None:
    """The caller holds `job_id`'s token. An unknown job answers the same as a wrong token."""
    token = bearer_token(headers)
    job = wiring_for(settings).store.get(job_id)
    if job is None:
        raise AuthError("credentials not recognised for this job", field="Authorization")
    if secret_matches(token, job.token_hash):
        return
    stale = stale_attempt_of(settings, job_id, int(job.attempt), token)
    if stale is not None:
        raise StaleAttemptError(
            f"attempt {stale} of job {job_id} is over (the job is on attempt {int(job.attempt)})",
            field="Authorization",
            hint="stop the task and exit",
        )
    raise AuthError("credentials not recognised for this job", field="Authorization")


def stale_attempt_of(settings: Settings, job_id: str, attempt: int, token: str) -> int | None:
    """The earlier attempt of the job whose agent token `token` is, or None. Tokens are derived
    (HMAC of job and attempt), so an old one is recognised without storing it."""
    from shared.jobs.tokens import agent_token

    for earlier in range(attempt - 1, max(-1, attempt - 1 - MAX_STALE_ATTEMPTS_CHECKED), -1):
        if hmac.compare_digest(agent_token(settings, job_id, earlier), token):
            return earlier
    return None


NODE_KEY_HEADER = "x-skyless-node-key"


@dataclass(frozen=True)
class BootCaller:
    """A node agent holding its job's boot token (user-data) and the key it made for itself at start."""

    job_id: str
    attempt: int
    node_key: str


def authenticate_boot(headers: Mapping[str, str], job_id: str, settings: Settings) -> BootCaller:
    """The caller holds the boot token of `job_id`'s current attempt, inside its boot window. Whether the
    node's one config fetch is still unclaimed is shared.jobs.node_claims's to decide."""
    from shared.jobs.tokens import check_boot_token

    token = bearer_token(headers)
    node_key = {name.lower(): value for name, value in headers.items()}.get(NODE_KEY_HEADER, "").strip()
    job = wiring_for(settings).store.get(job_id)
    if job is None:
        raise AuthError("credentials not recognised for this job", field="Authorization")
    attempt = int(job.attempt)
    if check_boot_token(settings, job_id, attempt + 1, token):
        attempt += 1  # a node made before the running attempt is let go: answered "not yet" (node_claims)
    elif not check_boot_token(settings, job_id, attempt, token):
        stale = stale_attempt_of(settings, job_id, int(job.attempt), token)
        if stale is not None:  # an earlier attempt's agent asking for its config again
            raise StaleAttemptError(
                f"attempt {stale} of job {job_id} is over (the job is on attempt {int(job.attempt)})",
                field="Authorization",
                hint="stop the task and exit",
            )
        raise AuthError("credentials not recognised for this job", field="Authorization")
    if not 16 <= len(node_key) <= 256:
        raise AuthError("the node's own key is missing", field="X-Skyless-Node-Key",
                        hint="the agent sends a random key of its own with its boot token")  # fmt: skip
    return BootCaller(job_id, attempt, node_key)
