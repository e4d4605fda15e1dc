"""Slack incoming webhooks: a Block Kit message, POSTed with retries.

429 is retried after its Retry-After (capped), 5xx and network errors with exponential backoff; any
other 4xx, a redirect (never followed) and a refused destination are final. The post goes only to a
checked public address of the webhook's host (outbound_http.py). Errors name the status, never
the URL, and never repeat what the remote answered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shared.config.channels import NotifyConfig
from shared.notifications.deliveries import Delivery
from shared.notifications.events import Notification
from shared.notifications.outbound_http import PinnedClient, RefusedDestination
from shared.notifications.webhook_secrets import mask_webhook

if TYPE_CHECKING:
    import httpx

MAX_ATTEMPTS = 4
BACKOFF_SECONDS = NotifyConfig.backoff_seconds  # 1, 2, 4 ... between tries after a 5xx or a network error
MAX_RETRY_AFTER_SECONDS = 30.0
TIMEOUT_SECONDS = 10.0

_posting: set[str] = set()  # webhook paths being posted to now; httpx's request log must not show them
_posting_lock = threading.Lock()


class _WebhookRedaction(logging.Filter):
    """httpx logs every request's URL at INFO; a webhook URL is a secret, so its log line shows it masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _posting_lock:
            secrets = list(_posting)
        if secrets:
            text = record.getMessage()
            for path in secrets:  # the request line names the pinned IP, so the secret path is what to hide
                text = text.replace(path, "/…" + path[-4:])
            record.msg, record.args = text, ()
        return True


logging.getLogger("httpx").addFilter(_WebhookRedaction())


def slack_payload(notification: Notification) -> dict[str, Any]:
    """Block Kit: a header, the event, the facts as fields, and how to read the logs (or check the file)."""
    facts = notification.lines()
    fields = [{"type": "mrkdwn", "text": f"*{label}*\n{value}"} for label, value in facts if label != "Logs"]
    return {
        "text": notification.subject,  # the fallback shown in notifications
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": notification.subject[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": notification.event_message[:2900] or "-"}},
            {"type": "section", "fields": fields},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": notification.hint}],
            },
        ],
    }


def _retry_after(answer: httpx.Response, fallback: float) -> float:
    try:
        return min(MAX_RETRY_AFTER_SECONDS, max(0.0, float(answer.headers.get("Retry-After", ""))))
    except ValueError:
        return fallback


def post_to_slack(
    url: str,
    payload: dict[str, Any],
    *,
    max_attempts: int = MAX_ATTEMPTS,
    backoff_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    allow_loopback: bool = False,
    client: PinnedClient | None = None,
) -> Delivery:
    """POST the payload; answers how it went after at most `max_attempts` tries. Never raises for HTTP.

    `allow_loopback` (the local runtime's setting) lets the post go to this machine; `client` replaces the
    pinned client (tests give one with their own resolver or CA)."""
    base = backoff_seconds if backoff_seconds is not None else _backoff_from_env()
    secret_path = _secret_part(url)
    with _posting_lock:
        _posting.add(secret_path)
    try:
        if client is not None:
            return _post(client, url, payload, max_attempts, base, sleep)
        with PinnedClient(allow_loopback=allow_loopback, timeout=TIMEOUT_SECONDS) as pinned:
            return _post(pinned, url, payload, max_attempts, base, sleep)
    finally:
        with _posting_lock:
            _posting.discard(secret_path)


def _secret_part(url: str) -> str:
    """A webhook's path (and query) is its secret; the host is not."""
    import httpx

    try:
        path = httpx.URL(url).raw_path.decode("ascii", "replace")
    except (httpx.InvalidURL, ValueError, TypeError):
        return url
    return path if len(path) > 8 else url


def _post(
    client: PinnedClient,
    url: str,
    payload: dict[str, Any],
    max_attempts: int,
    base: float,
    sleep: Callable[[float], None],
) -> Delivery:
    import httpx

    error = "not tried"
    attempts = 0
    for attempts in range(1, max_attempts + 1):
        wait = base * 2 ** (attempts - 1)
        try:
            answer = client.post_json(url, payload)
        except RefusedDestination as exc:
            return Delivery("slack", False, attempts, mask_webhook(url), f"refused: {exc}")
        except OSError:  # the host did not resolve (httpx's own errors are not OSErrors)
            error = "network error (the webhook's host did not resolve)"
        except httpx.HTTPError as exc:
            error = f"network error ({type(exc).__name__})"
        else:
            if answer.status_code < 300:
                return Delivery("slack", True, attempts, mask_webhook(url))
            error = f"HTTP {answer.status_code}"  # never the body: the caller must not read a remote's answer
            if 300 <= answer.status_code < 400:
                error += " (a redirect; webhooks are not redirected)"
            if answer.status_code == 429:
                wait = _retry_after(answer, wait)
            elif answer.status_code < 500:
                break
        if attempts < max_attempts:
            sleep(wait)
    return Delivery("slack", False, attempts, mask_webhook(url), error)


def _backoff_from_env() -> float:
    return NotifyConfig.from_env().backoff_seconds
