"""Reading every node's log of a job at once, each line prefixed by its node as SkyPilot does:
`(head, rank=0) …`, `(worker1, rank=1) …`; a single-node job's lines carry no prefix."""

from __future__ import annotations

from dataclasses import dataclass, field

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
        if flush:
            complete, log.partial = text, ""
        else:
            head, newline, log.partial = text.rpartition("\n")
            complete = head + newline
        if not complete:
            return ""
        prefix = rank_prefix(log.rank)
        return "".join(f"{prefix}{line}\n" for line in complete.removesuffix("\n").split("\n"))
