"""Every node's log, each line prefixed by its node; a line split across chunks is printed whole, once."""

from __future__ import annotations

from typing import Any

from cli.log_streams import LogStreams, node_count
from shared.api.models import JobDetail, LogsResponse


class Pages:
    """The API's log pages per rank, one page a read (what GET /jobs/{id}/logs answers)."""

    def __init__(self, pages: dict[int, list[tuple[str, bool]]]) -> None:
        self.pages = pages
        self.reads: list[tuple[int, str | None]] = []

    def read_logs(self, job_id: str, *, rank: int = 0, after: str | None = None) -> LogsResponse:
        self.reads.append((rank, after))
        text, finished = self.pages[rank].pop(0) if self.pages[rank] else ("", True)
        return LogsResponse(job_id=job_id, rank=rank, text=text, cursor=f"c{rank}-{len(self.reads)}",
                            finished=finished)  # fmt: skip


def _job(num_nodes: int) -> JobDetail:
    plan: dict[str, Any] = {"tasks": [{"candidates": [{"num_nodes": num_nodes}]}]}
    return JobDetail(job_id="job-1", state="RUNNING", plan=plan)


def test_two_nodes_lines_are_prefixed_and_a_split_line_is_joined() -> None:
    pages = Pages({0: [("step 1\nstep", False), (" 2\n", True)], 1: [("ready\n", False), ("", True)]})
    streams = LogStreams(pages, "job-1")  # type: ignore[arg-type]

    first = streams.read(_job(2))
    second = streams.read(_job(2))

    assert first == "(head, rank=0) step 1\n(worker1, rank=1) ready\n"
    assert second == "(head, rank=0) step 2\n"
    assert streams.finished
    assert (0, "c0-1") in pages.reads  # the cursor of a read is passed back


def test_a_single_node_log_is_passed_through_without_prefix() -> None:
    pages = Pages({0: [("progress 50%", False), (" 100%\n", True)]})
    streams = LogStreams(pages, "job-1")  # type: ignore[arg-type]

    assert streams.read(_job(1)) + streams.read(_job(1)) + streams.flush() == "progress 50% 100%\n"


def test_a_log_that_ends_inside_a_line_is_ended_once_at_the_end() -> None:
    pages = Pages({0: [("no newline at the end", True)]})
    streams = LogStreams(pages, "job-1")  # type: ignore[arg-type]

    assert streams.read(_job(1)) + streams.flush() == "no newline at the end\n"


def test_one_rank_asked_for_is_the_only_one_read_and_has_no_prefix() -> None:
    pages = Pages({0: [("head\n", True)], 1: [("worker\n", True)]})
    streams = LogStreams(pages, "job-1", ranks=[1])  # type: ignore[arg-type]

    assert streams.read(_job(2)) == "worker\n"
    assert {rank for rank, _ in pages.reads} == {1}


def test_the_number_of_ranks_is_the_widest_task_or_the_live_cluster() -> None:
    assert node_count(JobDetail(job_id="j", state="PENDING")) == 1
    assert node_count(_job(4)) == 4
    live = JobDetail(job_id="j", state="RUNNING", cluster={"nodes": [{}, {}, {}]})
    assert node_count(live) == 3


def test_a_progress_bars_redraws_each_get_the_nodes_prefix_as_skypilot_prints_them() -> None:
    pages = Pages({0: [("", True)], 1: [(" 10%|#\r 50%|###\r100%|#####\r\nnext", False), ("\n", True)]})
    streams = LogStreams(pages, "job-1")  # type: ignore[arg-type]

    assert streams.read(_job(2)) == (
        "(worker1, rank=1)  10%|#\r(worker1, rank=1)  50%|###\r(worker1, rank=1) 100%|#####\r\n"
    )
    assert streams.read(_job(2)) == "(worker1, rank=1) next\n"


def test_no_follow_prints_every_page_of_a_live_jobs_log_not_only_the_first(capsys: Any) -> None:
    from cli.log_streams import print_job_log

    pages = Pages({0: [(f"line {n}\n", False) for n in range(120)]})  # 120 pages, the job still running
    print_job_log(pages, "job-1", rank=0, follow=False, sleep=lambda _: None)  # type: ignore[arg-type]

    assert capsys.readouterr().out == "".join(f"line {n}\n" for n in range(120))


def test_tail_starts_with_the_last_lines_of_the_log_so_far_then_follows(capsys: Any) -> None:
    from cli.log_streams import print_job_log

    chunks = [("a\nb\n", False), ("c\r50%\rd\n", False), ("", False), ("e\n", True)]
    print_job_log(Pages({0: chunks}), "job-1", rank=0, follow=True, tail=2, sleep=lambda _: None)  # type: ignore[arg-type]

    assert capsys.readouterr().out == "b\nc\r50%\rd\ne\n"
