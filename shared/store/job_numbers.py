"""Each job's small integer id, SkyPilot's managed job id (`sky jobs cancel 3`), counted per owner: user A's
job 3 and user B's job 3 are two jobs, and a number never reaches another user's job. (SkyPilot's one
controller counts for everyone; a shared skyless stack counts for each user, so that a number alone cannot
name someone else's job.)

A number is an item of the events table, in the owner's partition `numbers#<owner>` under the zero-padded
number, naming its job. It is written in the same transaction as the job, on the condition that neither
exists: a submission delivered twice writes nothing the second time (the job's condition fails), and two
submissions that chose the same number cannot both write it (one retries with the next). The owner's
highest number is the last item of the partition, read newest first and strongly consistent (one item read),
so the numbers have no gaps. A job group's tasks take none (their group has one, as in SkyPilot, where a job
group is one managed job). Number items have no TTL: a number is never given twice, even after its job
expired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.store.models import JobModel

PARTITION_PREFIX = "numbers#"  # never a job id (`job-…`): the notify stream and timelines ignore it
MAX_DIGITS = 10
ALLOCATION_ATTEMPTS = 100  # each round one of an owner's concurrent submissions wins; the others retry


def partition_of(owner: str) -> str:
    return f"{PARTITION_PREFIX}{owner}"


def number_key(number: int) -> str:
    return f"{number:0{MAX_DIGITS}d}"


def is_numbered(job: JobModel) -> bool:
    """Whether a new job takes a number: a job group's task does not."""
    return job.group_id is None


def parse_job_number(text: str) -> int | None:
    """`text` as a job number (`3`), or None when it is not one (a `job-…` id, a name)."""
    if not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
        return None
    number = int(text)
    return number if number > 0 else None
