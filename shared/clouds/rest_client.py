"""A small JSON-over-HTTPS client for the REST clouds: one place that turns transport failures and
HTTP statuses into the error taxonomy, so each provider only maps its own error codes."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import certifi
import httpx

from shared.clouds.errors import (
    CloudAuthError,
    CloudError,
    InvalidLaunchError,
    TransientCloudError,
)

DEFAULT_TIMEOUT = 30.0


@functools.cache
def tls_context() -> ssl.SSLContext:
    """Loading the CA bundle costs ~0.1-0.5 s: once per process, shared by every client."""
    return ssl.create_default_context(cafile=certifi.where())


def new_http_client(timeout: float = DEFAULT_TIMEOUT) -> httpx.Client:
    return httpx.Client(timeout=timeout, verify=tls_context())


def error_for_status(status: int, message: str) -> CloudError:
    """The fallback mapping when a cloud's body says nothing more specific."""
    if status in (401, 403):
        return CloudAuthError(message)
    if status in (408, 409, 429) or status >= 500:
        return TransientCloudError(message)
    return InvalidLaunchError(message)


def body_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {"raw": response.text[:500]}


class RestClient:
    """`headers` is called per request (tokens expire); `classify` maps an error response to the taxonomy."""

    def __init__(
        self,
        base_url: str,
        headers: Callable[[], dict[str, str]],
        classify: Callable[[httpx.Response], CloudError],
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = headers
        self.classify = classify
        self.http = new_http_client(timeout)

    def url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}/{path.lstrip('/')}" if path else self.base_url

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        missing_ok: Iterable[int] = (),
    ) -> Any:
        """The decoded JSON body (None when empty, or when the status is one of `missing_ok`)."""
        try:
            response = self.http.request(
                method, self.url(path), json=json, params=params, headers=self.headers()
            )
        except httpx.TimeoutException as error:
            raise TransientCloudError(f"{method} {path}: timed out ({error})") from error
        except httpx.TransportError as error:
            raise TransientCloudError(f"{method} {path}: {error}") from error
        if response.status_code in set(missing_ok):
            return None
        if response.status_code >= 400:
            raise self.classify(response)
        return body_of(response) if response.content else None

    def close(self) -> None:
        self.http.close()
