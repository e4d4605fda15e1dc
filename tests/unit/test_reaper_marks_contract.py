"""The `ReaperMarks` contract (shared/store/reaper_marks.py), one set of assertions for every implementation:
here the in-memory marks; tests/integration/test_reaper_marks_contract_dynamo.py runs these same tests
against DynamoDB (moto's server) too."""

from __future__ import annotations

import pytest

from shared.store.memory_records import MemoryReaperMarks
from shared.store.reaper_marks import ReaperMarks


@pytest.fixture(params=["memory"])
def marks(request: pytest.FixtureRequest) -> ReaperMarks:
    return MemoryReaperMarks()


def test_a_mark_keeps_its_first_sighting(marks: ReaperMarks) -> None:
    first = marks.mark("aws", "job-1-0", now=100.0, job_id="job-1", reason="job finished")
    again = marks.mark("aws", "job-1-0", now=500.0, job_id="job-1", reason="job finished")
    assert (first.first_seen, first.state, first.owner_job, first.reason) == (
        100.0, "suspect", "job-1", "job finished",
    )  # fmt: skip
    assert (again.first_seen, again.state) == (100.0, "suspect")
    assert {cid: m.first_seen for cid, m in marks.of_provider("aws").items()} == {"job-1-0": 100.0}


def test_marks_are_per_provider_and_a_cluster_without_a_job_has_no_owner(marks: ReaperMarks) -> None:
    marks.mark("aws", "job-1-0", now=1.0, job_id="job-1", reason="r")
    stray = marks.mark("local", "stray-0", now=2.0, job_id="", reason="no job")
    assert stray.owner_job is None
    assert set(marks.of_provider("aws")) == {"job-1-0"}
    assert set(marks.of_provider("local")) == {"stray-0"}
    assert marks.of_provider("gcp") == {}


def test_a_kill_is_claimed_once(marks: ReaperMarks) -> None:
    mark = marks.mark("aws", "job-1-0", now=1.0, job_id="job-1", reason="r")
    other_sweep = marks.of_provider("aws")["job-1-0"]
    assert marks.claim_kill(mark)
    assert not marks.claim_kill(other_sweep)
    assert not marks.claim_kill(mark)
    assert marks.of_provider("aws")["job-1-0"].state == "killed"


def test_a_forgotten_mark_starts_over(marks: ReaperMarks) -> None:
    marks.mark("aws", "job-1-0", now=1.0, job_id="job-1", reason="r")
    marks.forget("aws", "job-1-0")
    marks.forget("aws", "job-1-0")  # again: nothing
    marks.forget("aws", "never-marked")
    assert marks.of_provider("aws") == {}
    assert marks.mark("aws", "job-1-0", now=9.0, job_id="job-1", reason="r").first_seen == 9.0
