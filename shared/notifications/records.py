"""The keys of the notifications table's send records (the table and its port: shared/store/notifications.py).

Keys (`pk`): `user#<owner>`, `job#<job id>`, `sent#<job id>#<v<version> | event at>#<channel>[#<topic>]`.
"""

from __future__ import annotations


def send_key(job_id: str, event_at: str, channel: str, *, also: str | None = None) -> str:
    """A state event's `at` ends in `#v<version>`: one version is one transition, so two events carrying it
    (a transaction that half-applied under a race) are one notification. Other events: their own `at`.
    `also`: an event's second topic (a RUNNING that is a recovery and a market change), sent on its own."""
    _, _, suffix = event_at.partition("#")
    identity = suffix if suffix.startswith("v") else event_at
    return f"sent#{job_id}#{identity}#{channel}" + (f"#{also}" if also else "")
