"""Reading every node's log of a job at once, each line prefixed by its node as SkyPilot does:
`(head, rank=0) …`, `(worker1, rank=1) …`; a single-node job's lines carry no prefix."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the API client and its models load when a verb calls the API, not with the command
    from cli.api_client import SkylessClient
    from shared.api.models import JobDetail


def node_count(job: JobDetail) -> int:
    """How many ranks the job has logs for: its widest task in the plan, or its live cluster."""
    counts = [1]
    for task in (job.plan or {}).get("tasks", []):
        counts.extend(int(c.get("num_nodes", 1)) for c in task.get("candidates", [])[:1])
    counts.append(len((job.cluster or {}).get("nodes", [])))
    return max(counts)


def rank_prefix(rank: int) -> str:
    return "(head, rank=0) " if rank == 0 else f"(worker{rank}, rank={rank}) "


@dataclass
class RankLog:
    """One rank's cursor, and the part of a line its last chunk ended in (printed once complete)."""

    rank: int
    cursor: str | None = None
    partial: str = ""
    finished: bool = False


@dataclass
class LogStreams:
    """Follows the logs of `ranks` (None: every rank the job has); `read` answers the new complete lines."""

    client: SkylessClient
    job_id: str
    ranks: list[int] | None = None
    logs: dict[int, RankLog] = field(default_factory=dict)
    prefixed: bool = False
    open_line: bool = False  # the text answered so far ends inside a line

    def read(self, job: JobDetail | None = None) -> str:
        """New text of every followed rank; `job` (when given) says how many ranks there are."""
        wanted = self.ranks if self.ranks is not None else list(range(node_count(job) if job else 1))
        self.prefixed = self.ranks is None and len(wanted) > 1
        out: list[str] = []
        for rank in wanted:
            log = self.logs.setdefault(rank, RankLog(rank))
            page = self.client.read_logs(self.job_id, rank=rank, after=log.cursor)
            log.cursor = page.cursor or log.cursor
            log.finished = page.finished
            out.append(self._lines(log, page.text, flush=page.finished))
        return self._answered("".join(out))

    @property
    def finished(self) -> bool:
        return bool(self.logs) and all(log.finished for log in self.logs.values())

    def flush(self) -> str:
        """What remains of lines no newline ended (the job is over), ending in a newline."""
        text = self._answered("".join(self._lines(log, "", flush=True) for log in self.logs.values()))
        return text + "\n" if self.open_line else text

    def _answered(self, text: str) -> str:
        if text:
            self.open_line = not text.endswith("\n")
        return text

    def _lines(self, log: RankLog, text: str, *, flush: bool) -> str:
        text = log.partial + text
        if not self.prefixed:  # one node: its text as it comes, partial lines too
            log.partial = ""
            return text
        cut = len(text) if flush else max(text.rfind("\n"), text.rfind("\r")) + 1
        complete, log.partial = text[:cut], text[cut:]
        if not complete:
            return ""
        prefix = rank_prefix(log.rank)  # before each piece a newline or `\r` ends, as SkyPilot prints them
        pieces = re.findall(r"[^\r\n]*(?:\r\n|\n|\r|$)", complete)
        return "".join(f"{prefix}{piece}" if piece.endswith(("\n", "\r")) else f"{prefix}{piece}\n"
                       for piece in pieces if piece)  # fmt: skip


def write_log(text: str) -> None:
    """Log text to stdout as it is, `\\r` and colours kept, as SkyPilot prints it (rich would drop the `\\r`
    a progress bar redraws its line with)."""
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


def print_job_log(
    client: SkylessClient,
    job_id: str,
    *,
    rank: int | None,
    follow: bool,
    tail: int = 0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Every chunk of the log there is (the API answers a page at a time: read until a read brings nothing),
    then with `follow` what comes until the job ends. `tail`: the backlog's last lines only."""
    streams = LogStreams(client, job_id, ranks=None if rank is None else [rank])
    backlog: list[str] | None = [] if tail else None
    while True:
        job = client.get_job(job_id) if rank is None else None
        text = streams.read(job)
        caught_up = not text or streams.finished
        if backlog is None:
            write_log(text)
        else:
            backlog.append(text)
            if caught_up:
                write_log(last_lines("".join(backlog), tail))
                backlog = None
        if streams.finished or (caught_up and not follow):
            write_log(streams.flush())
            return
        if not text:
            sleep(1.0)


def last_lines(text: str, count: int) -> str:
    """The last `count` lines of `text`, a line ending at a newline (`\\r` redraws stay in their line)."""
    lines = text.split("\n")
    ends_whole = text.endswith("\n")
    kept = lines[-(count + 1) :] if ends_whole else lines[-count:]
    return "\n".join(kept)
