"""The skyless API's HTTP calls, on the standard library (httpx costs a command ~0.1 s of CPU to import).

Kept as the httpx client the CLI used before: a 30 s timeout on each connect and read, no retry, redirects
not followed, TLS verified against certifi's CA bundle (or SSL_CERT_FILE / SSL_CERT_DIR when set), proxies
from the environment, and the same errors: ApiUnreachableError when nothing answers, ApiError with the
status and the message, field, file, line and hint the API named when it refuses.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

from shared.errors import UserError


class ApiError(UserError):
    """The API answered with an error: its status, and the message/field/line it named."""

    status_code: int = 0


class ApiUnreachableError(UserError):
    """Nothing answered at the API's URL."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx is the answer, as httpx's default follow_redirects=False has it


def _tls_context() -> ssl.SSLContext:
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()  # loads the files those name
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def opener(url: str) -> urllib.request.OpenerDirector:
    """For calls to `url`'s scheme (loading the CA bundle costs a plain-HTTP call to the local runtime
    more than the call itself)."""
    if url.startswith("https:"):
        return urllib.request.build_opener(urllib.request.HTTPSHandler(context=_tls_context()), _NoRedirects)
    return urllib.request.build_opener(_NoRedirects)


class Answer:
    """One HTTP answer, read whole."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status_code, self.reason_phrase, self.body = status, reason, body

    def json(self) -> Any:
        return json.loads(self.body)  # json.JSONDecodeError is a ValueError


def send(
    opener: urllib.request.OpenerDirector,
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float,
) -> Answer:
    """One request; any HTTP status is an Answer. OSError (refused, timed out, TLS) and
    http.client.HTTPException (a broken answer) are the caller's to word."""
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with opener.open(request, timeout=timeout) as response:
            return Answer(response.status, response.reason, response.read())
    except urllib.error.HTTPError as refused:
        with refused:
            return Answer(refused.code, str(refused.reason), refused.read())


def reason(exc: Exception) -> str:
    """What went wrong, without urllib's `<urlopen error …>` wrapping."""
    return str(exc.reason) if isinstance(exc, urllib.error.URLError) else str(exc)


TRANSPORT_ERRORS = (OSError, http.client.HTTPException, ValueError)  # ValueError: a URL urllib cannot use


class ApiHttp:
    """JSON calls to one API with one key."""

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._opener: urllib.request.OpenerDirector | None = None

    def call(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None) -> Any:
        """The answer's JSON; ApiError for a status >= 400 or a body that is not JSON."""
        url = self.base_url + path + (f"?{urlencode(params)}" if params else "")
        headers = dict(self._headers)
        body = None
        if json is not None:
            body = _json_bytes(json)
            headers["Content-Type"] = "application/json"
        if self._opener is None:
            self._opener = opener(self.base_url)
        try:
            answer = send(self._opener, method, url, body=body, headers=headers, timeout=self.timeout)
        except TRANSPORT_ERRORS as exc:
            raise ApiUnreachableError(
                f"cannot reach the skyless API at {self.base_url}: {reason(exc)}",
                hint="check --api-url / SKYLESS_API_URL, or start the local runtime with `skyless local up`",
            ) from exc
        if answer.status_code >= 400:
            raise error_from(answer)
        try:
            return answer.json()
        except ValueError as exc:
            raise ApiError(f"the API answered {answer.status_code} with a body that is not JSON") from exc


def put_upload(url: str, payload: bytes, headers: dict[str, str], *, field: str) -> None:
    """PUT a tarball where the API's upload answer said (a presigned URL: no API key goes there)."""
    sent = {"Content-Type": "application/octet-stream", **headers}  # else urllib says it is a form
    try:
        answer = send(opener(url), "PUT", url, body=payload, headers=sent, timeout=300.0)
    except TRANSPORT_ERRORS as exc:
        raise ApiUnreachableError(f"could not upload: {reason(exc)}", field=field) from exc
    if answer.status_code >= 300:
        raise ApiError(f"the upload was refused ({answer.status_code})", field=field)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def error_from(answer: Answer) -> ApiError:
    try:
        data = answer.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and "message" in data:
        error = ApiError(
            str(data.get("message")),
            file=data.get("file"),
            line=data.get("line"),
            field=data.get("field"),
            hint=data.get("hint"),
        )
    elif isinstance(data, dict) and "Message" in data:  # Chalice's own errors (404 route, 405, 415)
        error = ApiError(str(data["Message"]))
    else:
        error = ApiError(f"the API answered {answer.status_code} {answer.reason_phrase}")
    error.status_code = answer.status_code
    return error
