"""The outcome of one send on one channel, as the timeline records it (no URL, no secret in it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Delivery:
    channel: str  # "slack" | "email"
    ok: bool
    attempts: int
    target: str  # masked webhook or the email address
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "status": "sent" if self.ok else "failed",
            "attempts": self.attempts,
            "target": self.target,
            **({"error": self.error} if self.error else {}),
        }
