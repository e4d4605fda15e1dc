"""Who is calling: a user by API key, or a job's node agent by the job's token. Both stored only hashed."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from shared.config import Settings
from shared.errors import UserError
from shared.store.models import models_for
from shared.store.users import User, find_user


class AuthError(UserError):
    """No credentials, or credentials that match nothing. Answered with 401, saying nothing more."""


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
    jobs = models_for(settings).jobs
    try:
        job = jobs.get(job_id) if 0 < len(job_id) <= 256 else None
    except jobs.DoesNotExist:
        job = None
    if job is None or not secret_matches(token, job.token_hash):
        raise AuthError("credentials not recognised for this job", field="Authorization")
