"""Log shipping: task output buffered and uploaded as numbered chunks through a presigned POST."""

from __future__ import annotations

import io
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from node_agent.agent.api import http_request, log, with_retries

LOG_FLUSH_SECONDS = float(os.environ.get("SKYLESS_LOG_FLUSH_SECONDS", "2"))
LOG_FLUSH_BYTES = 64 * 1024


def encode_multipart(fields: dict[str, str], file_name: str, content: bytes) -> tuple[bytes, str]:
    """multipart/form-data for an S3 presigned POST: the policy fields, then the file (S3 wants it last)."""
    boundary = "skyless-" + uuid.uuid4().hex
    out = io.BytesIO()
    for name, value in fields.items():
        out.write((f"--{boundary}\r\n").encode())
        out.write((f'Content-Disposition: form-data; name="{name}"\r\n\r\n').encode())
        out.write(str(value).encode("utf-8"))
        out.write(b"\r\n")
    out.write((f"--{boundary}\r\n").encode())
    out.write(
        (f'Content-Disposition: form-data; name="file"; filename="{file_name}"\r\n').encode()
        + b"Content-Type: text/plain\r\n\r\n"
    )
    out.write(content)
    out.write((f"\r\n--{boundary}--\r\n").encode())
    return out.getvalue(), "multipart/form-data; boundary=" + boundary


class LogShipper:
    """Buffers task output and uploads it as numbered chunks under key_prefix, by size or by time."""

    def __init__(self, upload: dict[str, Any] | None, local_copy: Path | None = None) -> None:
        self.upload = upload
        self.local_copy = local_copy
        self.buffer = bytearray()
        self.next_chunk = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.timer = threading.Thread(target=self._flush_periodically, name="log-flush", daemon=True)
        self.timer.start()

    def write(self, data: bytes) -> None:
        if self.local_copy is not None:
            with open(str(self.local_copy), "ab") as out:
                out.write(data)
        with self.lock:
            self.buffer.extend(data)
            full = len(self.buffer) >= LOG_FLUSH_BYTES
        if full:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            if not self.buffer:
                return
            content, self.buffer = bytes(self.buffer), bytearray()
            chunk = self.next_chunk
            self.next_chunk += 1
            self._upload(chunk, content)

    def _upload(self, chunk: int, content: bytes) -> None:
        upload = self.upload
        if not upload:
            return
        fields = dict(upload.get("fields") or {})
        name = f"{chunk:08d}.log"
        fields["key"] = upload["key_prefix"] + name
        body, content_type = encode_multipart(fields, name, content)
        try:
            status, answer = with_retries(
                lambda: http_request(
                    upload["url"], method="POST", body=body, headers={"Content-Type": content_type}
                )
            )
        except OSError as error:
            log(f"log chunk {chunk} lost: {error}")
            return
        if status >= 300:
            log(f"log chunk {chunk} refused: HTTP {status} {answer[:200]!r}")

    def _flush_periodically(self) -> None:
        while not self.stopped.wait(LOG_FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self.stopped.set()
        self.flush()
