"""Each job's number among its owner's jobs (shared/store/job_numbers.py), as the `JobStore` contract: the
in-memory store here; tests/integration/test_job_numbers_dynamo.py runs the same tests against DynamoDB
(moto's server), where concurrent submissions race for real."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from test_job_store_contract import StoreUnderTest, memory_store, new_job

from shared.store.job_numbers import parse_job_number


@pytest.fixture(params=["memory"])
def under_test(request: pytest.FixtureRequest) -> StoreUnderTest:
    return memory_store()


def test_each_owner_counts_from_one_and_a_number_finds_only_its_owners_job(
    under_test: StoreUnderTest,
) -> None:
    store = under_test.store
    jobs = [new_job(store, f"job-a{i:011d}", owner="alice") for i in range(3)]
    jobs.append(new_job(store, "job-b00000000000", owner="bob"))
    for job in jobs:
        assert store.create(job, "submitted")

    assert [job.job_number for job in jobs] == [1, 2, 3, 1]
    assert store.job_id_numbered("alice", 2) == "job-a00000000001"
    assert store.job_id_numbered("bob", 1) == "job-b00000000000"
    assert store.job_id_numbered("bob", 2) is None  # alice's 2 is not bob's
    assert store.job_id_numbered("carol", 1) is None
    saved = store.get("job-a00000000002")
    assert saved is not None and saved.job_number == 3


def test_a_submission_delivered_twice_takes_one_number(under_test: StoreUnderTest) -> None:
    store = under_test.store
    first = new_job(store, "job-0000000000aa")
    assert store.create(first, "submitted")

    again = new_job(store, "job-0000000000aa")  # the same upload's event, delivered again
    assert not store.create(again, "submitted")
    after = new_job(store, "job-0000000000bb")
    assert store.create(after, "submitted")

    assert first.job_number == 1 and after.job_number == 2  # no gap: the duplicate took nothing
    assert store.job_id_numbered("alice", 1) == "job-0000000000aa"
    assert store.job_id_numbered("alice", 3) is None


def test_a_job_groups_tasks_take_no_number(under_test: StoreUnderTest) -> None:
    store = under_test.store
    member = new_job(store, "job-00000000m001", group_id="job-00000000g001", group_index=0)
    group = new_job(store, "job-00000000g001")
    assert store.create(member, "submitted") and store.create(group, "submitted")

    assert member.job_number is None and group.job_number == 1


def test_concurrent_submissions_of_one_owner_never_share_a_number(under_test: StoreUnderTest) -> None:
    store = under_test.store
    ids = [f"job-c{i:011d}" for i in range(24)]

    def submit(job_id: str) -> int:
        owner = "bob" if job_id.endswith("7") else "alice"
        job = new_job(store, job_id, owner=owner)
        assert store.create(job, "submitted")
        return int(job.job_number)

    with ThreadPoolExecutor(max_workers=8) as pool:
        numbers = dict(zip(ids, pool.map(submit, ids), strict=True))

    alice = sorted(n for job_id, n in numbers.items() if not job_id.endswith("7"))
    bob = sorted(n for job_id, n in numbers.items() if job_id.endswith("7"))
    assert alice == list(range(1, 23)) and bob == [1, 2]  # each owner's numbers: distinct, no gaps
    for job_id, number in numbers.items():
        assert store.job_id_numbered("bob" if job_id.endswith("7") else "alice", number) == job_id


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1", 1),
        ("42", 42),
        ("0", None),
        ("-1", None),
        ("job-1", None),
        ("1a", None),
        ("\u0661", None),
        ("1" * 11, None),
    ],
)
def test_parse_job_number_takes_positive_decimal_numbers_only(text: str, number: int | None) -> None:
    assert parse_job_number(text) == number
