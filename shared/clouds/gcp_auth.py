"""GCP access tokens, kept simple: a static `GOOGLE_OAUTH_ACCESS_TOKEN`, or a credentials file —
`GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's application-default credentials
(`$CLOUDSDK_CONFIG` or ~/.config/gcloud/application_default_credentials.json). A service-account key is
exchanged at its `token_uri` with a signed JWT (RFC 7523); an `authorized_user` file (from
`gcloud auth application-default login`) with its refresh token. Tokens are cached until a minute before
they expire. The project comes from `GOOGLE_CLOUD_PROJECT`, `CLOUDSDK_CORE_PROJECT` or the file's
`project_id` / `quota_project_id`."""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from shared.clouds.errors import CloudAuthError, TransientCloudError
from shared.clouds.rest_client import new_http_client
from shared.config.clouds import GcpConfig

SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # Compute Engine and the TPU API
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
HELP = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run "
    "`gcloud auth application-default login`, or set GOOGLE_OAUTH_ACCESS_TOKEN"
)
DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"
KINDS = {
    "service_account": {"client_email", "private_key"},
    "authorized_user": {"client_id", "client_secret", "refresh_token"},
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_jwt(key_info: dict[str, Any], now: float) -> str:
    header = {"alg": "RS256", "typ": "JWT", "kid": key_info.get("private_key_id", "")}
    claims = {
        "iss": key_info["client_email"],
        "scope": SCOPE,
        "aud": key_info["token_uri"],
        "iat": int(now),
        "exp": int(now) + 3600,
    }
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    key = serialization.load_pem_private_key(key_info["private_key"].encode(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise CloudAuthError("the service-account key is not an RSA key")
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


@dataclass
class GcpTokenSource:
    static_token: str | None = None
    key_info: dict[str, Any] | None = None
    _token: str | None = None
    _expires_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_config(cls, config: GcpConfig) -> GcpTokenSource:
        if token := config.access_token:
            return cls(static_token=token)
        named = config.credentials_file
        gcloud = config.gcloud_dir or Path.home() / ".config" / "gcloud"
        path = Path(named).expanduser() if named else gcloud / "application_default_credentials.json"
        if not named and not path.is_file():
            return cls()
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise CloudAuthError(f"cannot read GCP credentials {path}: {error}") from error
        needed = KINDS.get(str(info.get("type")))
        if needed is None or not needed <= info.keys():
            raise CloudAuthError(f"{path} is not a service-account key or authorized_user file ({HELP})")
        info.setdefault("token_uri", DEFAULT_TOKEN_URI)
        return cls(key_info=info)

    @property
    def project_hint(self) -> str | None:
        info = self.key_info or {}
        return info.get("project_id") or info.get("quota_project_id")

    @property
    def expires_at(self) -> float | None:
        """When the last token given out expires (None: a static token, of unknown life)."""
        return None if self.static_token or self._token is None else self._expires_at

    def token(self) -> str:
        if self.static_token:
            return self.static_token
        if self.key_info is None:
            raise CloudAuthError(f"no GCP credentials: {HELP}")
        with self._lock:
            if self._token is None or time.time() > self._expires_at - 60:
                self._token, self._expires_at = self._exchange()
            return self._token

    def _exchange(self) -> tuple[str, float]:
        assert self.key_info is not None
        now = time.time()
        info = self.key_info
        if info["type"] == "authorized_user":
            form = {
                "grant_type": "refresh_token",
                "client_id": info["client_id"],
                "client_secret": info["client_secret"],
                "refresh_token": info["refresh_token"],
            }
        else:
            form = {"grant_type": JWT_GRANT, "assertion": signed_jwt(info, now)}
        try:
            with new_http_client() as http:
                response = http.post(self.key_info["token_uri"], data=form)
        except httpx.TransportError as error:
            raise TransientCloudError(f"GCP token endpoint: {error}") from error
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientCloudError(f"GCP token endpoint answered {response.status_code}")
        if response.status_code != 200:
            raise CloudAuthError(f"GCP refused the {info['type']} credentials: {response.text[:300]}")
        body = response.json()
        return str(body["access_token"]), now + float(body.get("expires_in", 3600))


def project_of(config: GcpConfig, tokens: GcpTokenSource) -> str | None:
    """The project to launch in: `GOOGLE_CLOUD_PROJECT`, `CLOUDSDK_CORE_PROJECT`, else the key file's."""
    return config.project or tokens.project_hint


def bearer_headers(project: str | None, tokens: GcpTokenSource) -> dict[str, str]:
    """What every GCP REST call carries; a CloudAuthError when there is no project to call for."""
    if not project:
        raise CloudAuthError("no GCP project: set GOOGLE_CLOUD_PROJECT (or use a service-account key file)")
    return {"Authorization": f"Bearer {tokens.token()}"}
