"""What an operation did with a message: handlers and tests read it; nobody raises for a duplicate."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    DONE = "done"  # the step happened now
    ALREADY_DONE = "already_done"  # a duplicate, late or out-of-order message: nothing changed
    STALE = "stale"  # the message is about an attempt the job has moved past
    RETRY_LATER = "retry_later"  # a delayed message was sent; the job waits
    UNKNOWN_JOB = "unknown_job"
