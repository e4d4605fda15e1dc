"""The node's side of the API: HTTP with retries, the one config fetch that trades the boot token for
the agent token, bucket credentials, and phase reports (POST /agent/{job}/status)."""

from __future__ import annotations

import json
import os
import random
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
NOT_READY_STATUS = 425
STOP_STATUS = 410  # this node's attempt is over: kill the task and exit
PREEMPT_GRACE_SECONDS = float(os.environ.get("SKYLESS_PREEMPT_GRACE_SECONDS", "100"))
STOP_GRACE_SECONDS = float(os.environ.get("SKYLESS_STOP_GRACE_SECONDS", "10"))


def log(message: str) -> None:
    sys.stderr.write(f"[skyless-agent] {message}\n")
    sys.stderr.flush()


class AgentHttpError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


def http_request(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, bytes]:
    """One HTTP exchange; returns (status, body) for every status, raises OSError on network failure."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def with_retries(
    call: Callable[[], tuple[int, bytes]], attempts: int = 6, first_delay: float = 0.5
) -> tuple[int, bytes]:
    """Retry network errors and 429/5xx with exponential backoff and jitter; return the last answer."""
    delay = first_delay
    for attempt in range(attempts):
        try:
            status, body = call()
            if status not in RETRYABLE_STATUS:
                return status, body
            failure = f"HTTP {status}"
        except OSError as error:
            status, body, failure = 0, b"", str(error)
        if attempt == attempts - 1:
            if status:
                return status, body
            raise OSError(f"gave up after {attempts} attempts: {failure}")
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 10.0)
    raise AssertionError("unreachable")


class AgentStopped(Exception):
    """The API said this node has no part in the job any more (HTTP 410 or `"stop": true`)."""


class ApiClient:
    """The agent side of the node agent protocol (docs/architecture.md)."""

    def __init__(self, api_url: str, job_id: str, instance_id: str, boot_token: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.job_id = job_id
        self.instance_id = instance_id
        self.node_key = secrets.token_hex(32)  # binds the one config fetch to this process
        self.headers = {"Authorization": "Bearer " + boot_token, "Content-Type": "application/json"}
        self.on_cancel: Callable[[], None] | None = None  # the API says the job is over
        self.has_agent_token = False  # reports need the agent token the config answer carries
        self.on_stop: Callable[[str], None] | None = None  # the API says this node must stop and exit
        self.on_preempt: Callable[[str], None] | None = None  # a budget stops the job: a preemption notice

    def fetch_config(
        self,
        poll_seconds: float = 1.0,
        give_up_after: float = 3600.0,
        stop: Callable[[], bool] = lambda: False,
    ) -> dict[str, Any] | None:
        """GET the node's config, waiting while the API answers 425 (not every node is known yet).

        None when `stop()` turns true while waiting (the node is going away)."""
        url = "{}/agent/{}/config?{}".format(
            self.api_url,
            urllib.parse.quote(self.job_id),
            urllib.parse.urlencode({"instance_id": self.instance_id}),
        )
        deadline = time.monotonic() + give_up_after
        headers = {**self.headers, "X-Skyless-Node-Key": self.node_key}
        while True:
            status, body = with_retries(lambda: http_request(url, headers=headers))
            if status == 200:
                config = json.loads(body.decode("utf-8"))
                if config.get("agent_token"):  # from now on the boot token opens nothing
                    self.headers = {**self.headers, "Authorization": "Bearer " + config["agent_token"]}
                    self.has_agent_token = True
                return config
            if status == STOP_STATUS:
                raise AgentStopped(body.decode("utf-8", "replace")[:300])
            if status != NOT_READY_STATUS or time.monotonic() > deadline:
                raise AgentHttpError(status, body.decode("utf-8", "replace"))
            if stop():
                return None
            time.sleep(poll_seconds)
            poll_seconds = min(poll_seconds * 1.5, 5.0)

    def storage_credentials(self) -> list[dict[str, Any]]:
        """Fresh credentials for the node's buckets (POST /agent/{job}/storage)."""
        url = f"{self.api_url}/agent/{urllib.parse.quote(self.job_id)}/storage"
        data = json.dumps({"instance_id": self.instance_id}).encode("utf-8")
        status, body = with_retries(lambda: http_request(url, method="POST", body=data, headers=self.headers))
        if status != 200:
            raise AgentHttpError(status, body.decode("utf-8", "replace"))
        return list(json.loads(body.decode("utf-8")).get("storage") or [])

    def report(self, phase: str, exit_code: int | None = None, message: str | None = None) -> bool:
        """POST a phase; True when the API accepted it. Never raises: a lost report is not fatal."""
        payload: dict[str, Any] = {"instance_id": self.instance_id, "phase": phase}
        if exit_code is not None:
            payload["exit_code"] = exit_code
        if message:
            payload["message"] = message[:2000]
        url = f"{self.api_url}/agent/{urllib.parse.quote(self.job_id)}/status"
        data = json.dumps(payload).encode("utf-8")
        try:
            status, body = with_retries(
                lambda: http_request(url, method="POST", body=data, headers=self.headers)
            )
        except OSError as error:
            log(f"could not report {phase}: {error}")
            return False
        if status == STOP_STATUS:
            if self.on_stop is not None:
                self.on_stop(f"the API refused this node's attempt: {body[:200]!r}")
            return False
        if status >= 300:
            log(f"status {phase} answered HTTP {status}: {body[:200]!r}")
            return False
        try:
            answer = json.loads(body.decode("utf-8") or "{}")
        except ValueError:
            answer = {}
        if isinstance(answer, dict) and answer.get("stop") and self.on_stop is not None:
            self.on_stop(f"the API says this node has no part in job {self.job_id} now")
        elif isinstance(answer, dict) and answer.get("cancel") and self.on_cancel is not None:
            self.on_cancel()
        elif isinstance(answer, dict) and answer.get("preempt") and self.on_preempt is not None:
            self.on_preempt(f"the control plane: {str(answer['preempt'])[:300]}")
        return True
