"""Dashboard sign-in: an API key is exchanged for a signed, short-lived session cookie.

The cookie (HttpOnly, SameSite=Strict, Secure over https, Path=/dashboard) holds the SHA-256 of the key
(never the key), a random nonce and the time it was signed (itsdangerous, and in ms). Every request
re-reads the key's record, so a revoked key ends its sessions at once, and so does signing out: it records
on the key's record that sessions signed until then are over, so a copied cookie stops working too (every
browser signed in with that key is signed out; the next sign-in is a new session).
CSRF: every form carries HMAC(secret, nonce) of the session it was rendered for; the sign-in form, which
has no session yet, carries the HMAC of a nonce in a short-lived signed cookie of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie

from itsdangerous import BadSignature, URLSafeTimedSerializer

from shared.config import Settings
from shared.config.control_plane import DashboardConfig
from shared.errors import UserError
from shared.jobs.tokens import control_plane_secret
from shared.store.users import User, end_sessions, find_key, find_user, hash_api_key

SESSION_COOKIE = "skyless_session"
SIGN_IN_COOKIE = "skyless_sign_in"
COOKIE_PATH = "/dashboard"
SIGN_IN_SECONDS = 3600
DEFAULT_SESSION_SECONDS = DashboardConfig.session_seconds


class SignInNeeded(UserError):
    """No session, or one that has expired, was tampered with, or whose key was revoked. `field` is a
    reason code for the sign-in page (`expired`, `revoked`, `api_key`)."""


class CsrfError(UserError):
    """A form came without the token of the session (or sign-in page) it was rendered for."""


def session_seconds() -> int:
    return DashboardConfig.from_env().session_seconds


def session_secret(settings: Settings) -> bytes:
    """`SKYLESS_SESSION_SECRET`, else a key derived from (never equal to) the control-plane secret."""
    configured = DashboardConfig.from_env().session_secret
    if configured:
        return configured.encode("utf-8")
    return hmac.new(control_plane_secret(settings), b"skyless dashboard sessions", hashlib.sha256).digest()


@dataclass(frozen=True)
class Session:
    user: User
    key_hash: str
    nonce: str
    signed_ms: int  # when the cookie was signed


def request_cookies(headers: Mapping[str, str]) -> dict[str, str]:
    raw = headers.get("cookie") or headers.get("Cookie") or ""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def is_https(headers: Mapping[str, str]) -> bool:
    """API Gateway (and any TLS-terminating proxy) says the scheme the browser used."""
    return (headers.get("x-forwarded-proto") or headers.get("X-Forwarded-Proto") or "").lower() == "https"


def cookie_header(name: str, value: str, *, max_age: int, secure: bool) -> str:
    parts = [f"{name}={value}", f"Path={COOKIE_PATH}", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


class SessionKeeper:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._secret = session_secret(settings)
        self._sessions = URLSafeTimedSerializer(self._secret, salt="skyless-dashboard-session")
        self._sign_ins = URLSafeTimedSerializer(self._secret, salt="skyless-dashboard-sign-in")

    # -- sessions --------------------------------------------------------------------------------

    def sign_in(self, api_key: str) -> tuple[Session, str]:
        """The session for a key and its cookie value; SignInNeeded for a key that matches nothing."""
        api_key = api_key.strip()
        user = find_user(api_key, self.settings) if 0 < len(api_key) <= 512 else None
        if user is None:
            raise SignInNeeded("that API key is not recognised", field="api_key")
        session = Session(user, hash_api_key(api_key), secrets.token_urlsafe(16), _now_ms())
        payload = {"k": session.key_hash, "n": session.nonce, "t": session.signed_ms}
        return session, self._sessions.dumps(payload)

    def session(self, headers: Mapping[str, str]) -> Session:
        """The request's session, or SignInNeeded."""
        value = request_cookies(headers).get(SESSION_COOKIE)
        if not value or len(value) > 4096:
            raise SignInNeeded("sign in with your API key")
        try:
            payload, signed_at = self._sessions.loads(value, max_age=session_seconds(), return_timestamp=True)
            key_hash, nonce = str(payload["k"]), str(payload["n"])
            signed_ms = int(payload.get("t") or signed_at.timestamp() * 1000)
        except (BadSignature, KeyError, TypeError, ValueError, AttributeError):
            raise SignInNeeded("your session has expired: sign in again", field="expired") from None
        found = find_key(key_hash, self.settings)  # a revoked key: its sessions end now
        if found is None:
            raise SignInNeeded("your API key was revoked: sign in with another", field="revoked")
        user, ended_ms = found
        if ended_ms is not None and signed_ms <= ended_ms:
            raise SignInNeeded("you signed out: sign in again", field="signed_out")
        return Session(user=user, key_hash=key_hash, nonce=nonce, signed_ms=signed_ms)

    def sign_out(self, session: Session) -> None:
        """End this session, and every other of its key signed until now, for good (not only the cookie):
        never earlier than the session's own signing time, whatever this machine's clock says."""
        end_sessions(session.key_hash, max(_now_ms(), session.signed_ms), self.settings)

    def csrf_token(self, session: Session) -> str:
        return self._mac(f"session:{session.nonce}")

    def check_csrf(self, session: Session, token: str | None) -> None:
        if not token or not hmac.compare_digest(token, self.csrf_token(session)):
            raise CsrfError("this form has expired or did not come from this dashboard: reload and retry")

    # -- the sign-in form ------------------------------------------------------------------------

    def sign_in_form(self) -> tuple[str, str]:
        """(cookie value, form token) for a sign-in page."""
        nonce = secrets.token_urlsafe(16)
        return self._sign_ins.dumps(nonce), self._mac(f"sign-in:{nonce}")

    def check_sign_in_form(self, headers: Mapping[str, str], token: str | None) -> None:
        value = request_cookies(headers).get(SIGN_IN_COOKIE) or ""
        try:
            nonce = str(self._sign_ins.loads(value, max_age=SIGN_IN_SECONDS))
        except BadSignature:
            raise CsrfError("the sign-in form has expired: reload it and sign in again") from None
        if not token or not hmac.compare_digest(token, self._mac(f"sign-in:{nonce}")):
            raise CsrfError("the sign-in form has expired: reload it and sign in again")

    def _mac(self, text: str) -> str:
        return hmac.new(self._secret, text.encode("utf-8"), hashlib.sha256).hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)
