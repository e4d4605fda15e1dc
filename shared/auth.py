"""Secrets the API accepts (user API keys, per-job agent tokens): made random, stored only as hashes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

from shared.errors import UserError

API_KEY_PREFIX = "sky_"


class AuthError(UserError):
    """No credentials, or credentials that match nothing. Answered with 401, saying nothing more."""


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def new_job_token() -> str:
    return secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """SHA-256 hex: the only form in which a key or token is stored."""
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
