"""Cloudflare's R2 temporary-credentials API (`POST /accounts/{account}/r2/temp-access-credentials`), as
documented: a bearer API token, a JSON body {bucket, parentAccessKeyId, permission, ttlSeconds, prefixes?},
and an answer {success, errors, messages, result: {accessKeyId, secretAccessKey, sessionToken}}."""

from __future__ import annotations

import secrets
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer, json_response

PERMISSIONS = ("admin-read-write", "admin-read-only", "object-read-write", "object-read-only")


class FakeCloudflareR2:
    def __init__(self, account_id: str, api_token: str) -> None:
        self.account_id = account_id
        self.api_token = api_token
        self.requests: list[dict[str, Any]] = []
        self.server = FakeServer(self._handle)
        self.url = self.server.url + "/client/v4"

    def start(self) -> FakeCloudflareR2:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def _handle(self, request: Request) -> Response:
        def error(code: int, message: str, status: int) -> Response:
            return json_response({"success": False, "errors": [{"code": code, "message": message}]}, status)

        if request.headers.get("Authorization") != f"Bearer {self.api_token}":
            return error(10000, "Authentication error", 403)
        route = f"/client/v4/accounts/{self.account_id}/r2/temp-access-credentials"
        if request.method != "POST" or request.path != route:
            return error(7003, "No route for that URI", 404)
        body = request.get_json()
        missing = [k for k in ("bucket", "parentAccessKeyId", "permission", "ttlSeconds") if k not in body]
        if missing or body["permission"] not in PERMISSIONS:
            return error(10001, f"missing or bad fields: {missing or 'permission'}", 400)
        self.requests.append(body)
        result = {"accessKeyId": "r2tmp" + secrets.token_hex(8), "secretAccessKey": secrets.token_hex(16),
                  "sessionToken": secrets.token_urlsafe(24)}  # fmt: skip
        return json_response({"success": True, "errors": [], "messages": [], "result": result})
