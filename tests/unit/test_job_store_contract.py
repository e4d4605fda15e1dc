"""The `JobStore` contract (shared/store/job_store.py), one set of assertions for every implementation: here
the in-memory store; tests/integration/test_job_store_contract_dynamo.py runs these same tests against
DynamoDB (moto's server) too, so the fake cannot drift from the real store."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from shared.optimizer.cooling import FORGET_AFTER_SECONDS
from shared.states import IllegalTransition, JobState
from shared.store.cooldowns import (
    KEPT_IN_ALL,
    KEPT_PER_ZONE,
    PRUNE_PAST_IN_ALL,
    PRUNE_PAST_PER_ZONE,
    WRITE_CAP,
    WRITE_CAP_IN_ALL,
    PrunedCooldowns,
)
from shared.store.job_store import Cooldowns, JobStore, NodeFields
from shared.store.memory import MemoryJobStore
from shared.store.models import JobModel


@dataclass
class StoreUnderTest:
    store: JobStore
    cooldowns: Cooldowns


def memory_store() -> StoreUnderTest:
    store = MemoryJobStore()
    return StoreUnderTest(store, store.cooldowns)


@pytest.fixture(params=["memory"])
def under_test(request: pytest.FixtureRequest) -> StoreUnderTest:
    return memory_store()


def new_job(
    store: JobStore, job_id: str = "job-00000000000a", owner: str = "alice", **fields: Any
) -> JobModel:
    values: dict[str, Any] = {
        "owner": owner,
        "state": JobState.PENDING.value,
        "version": 0,
        "token_hash": "h",
    }
    return store.new_job(job_id=job_id, **{**values, **fields})


def created(store: JobStore, job_id: str = "job-00000000000a", **fields: Any) -> JobModel:
    job = new_job(store, job_id, **fields)
    assert store.create(job, "submitted")
    return job


def cluster_of(store: JobStore, job: JobModel, *instance_ids: str) -> Any:
    return store.new_cluster(
        cluster_id=f"{job.job_id}-0", job_id=job.job_id, attempt=0, provider="local", cloud="aws",
        region="us-east-1", zone="us-east-1a", instance_type="m5.large", use_spot=True,
        num_nodes=len(instance_ids),
        state="UP", nodes={iid: {"rank": rank, "phase": "booting"} for rank, iid in enumerate(instance_ids)},
        launched_at=time.time(),
    )  # fmt: skip


def launched(store: JobStore, *instance_ids: str) -> tuple[JobModel, Any]:
    job = created(store)
    assert store.move(job, JobState.PLANNED, "planned")
    cluster = cluster_of(store, job, *instance_ids)
    refs = [
        store.new_node_ref(iid, job.job_id, cluster.cluster_id, rank) for rank, iid in enumerate(instance_ids)
    ]
    assert store.move(job, JobState.SETTING_UP, "launched", changes={"cluster_id": cluster.cluster_id},
                      also_save=[cluster, *refs])  # fmt: skip
    return job, store.cluster(cluster.cluster_id)


def test_a_created_job_reads_back_with_its_first_event(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job = created(store, name="train")
    stored = store.get(job.job_id)
    assert stored is not None and (stored.owner, stored.name, stored.state, stored.version) == (
        "alice",
        "train",
        "PENDING",
        0,
    )
    assert stored.created_at == job.created_at and stored.updated_at == job.updated_at
    assert [(e.kind, e.message, e.state) for e in store.timeline(job.job_id)] == [
        ("state", "submitted", "PENDING")
    ]


def test_the_timeline_lists_every_event_in_order_with_its_detail_across_attempts(
    under_test: StoreUnderTest,
) -> None:
    """DynamoDB keeps a job's first event in its item and a launch's in its cluster record (one item less
    each): the timeline reads the same as if each were an item of its own."""
    store = under_test.store
    job = new_job(store)
    assert store.create(job, "submitted", {"notes": ["a note"]})
    assert store.move(job, JobState.PLANNED, "planned")
    stale = store.get(job.job_id)
    first = cluster_of(store, job, "i-1")
    assert store.move(job, JobState.SETTING_UP, "launched 1", changes={"cluster_id": first.cluster_id},
                      detail={"instances": ["i-1"]}, also_save=[first])  # fmt: skip
    assert store.move(job, JobState.RUNNING, "running")
    lost = cluster_of(store, job, "i-9")
    lost.cluster_id = f"{job.job_id}-1"
    assert stale is not None and not store.move(stale, JobState.SETTING_UP, "late", also_save=[lost])
    assert store.move(job, JobState.RECOVERING, "preempted", changes={"attempt": 1, "cluster_id": None})
    assert store.move(job, JobState.PLANNED, "replanned")
    second = cluster_of(store, job, "i-2")
    second.cluster_id, second.attempt = f"{job.job_id}-1", 1
    assert store.move(job, JobState.SETTING_UP, "launched 2", changes={"cluster_id": second.cluster_id},
                      detail={"instances": ["i-2"]}, also_save=[second])  # fmt: skip

    events = store.timeline(job.job_id)

    assert [(e.message, e.state) for e in events] == [
        ("submitted", "PENDING"), ("planned", "PLANNED"), ("launched 1", "SETTING_UP"),
        ("running", "RUNNING"), ("preempted", "RECOVERING"), ("replanned", "PLANNED"),
        ("launched 2", "SETTING_UP"),
    ]  # fmt: skip
    assert [e.at for e in events] == sorted(e.at for e in events) and all(e.kind == "state" for e in events)
    assert events[0].detail["notes"] == ["a note"] and events[-1].detail["instances"] == ["i-2"]
    assert {e.job_id for e in events} == {job.job_id}
    read = store.get(job.job_id)
    clusters = store.clusters_by_id([first.cluster_id, second.cluster_id]).values()
    assert read is not None  # from the records already read (the provider report's): the same events
    assert [e.serialize() for e in store.job_timeline(read, clusters)] == [e.serialize() for e in events]


def test_creating_an_existing_id_answers_false_and_keeps_the_first(under_test: StoreUnderTest) -> None:
    store = under_test.store
    created(store, name="first")
    assert not store.create(new_job(store, name="second"), "again")
    stored = store.get("job-00000000000a")
    assert stored is not None and stored.name == "first"
    assert [e.message for e in store.timeline("job-00000000000a")] == ["submitted"]


@pytest.mark.parametrize("job_id", ["", "job-unknown", "x" * 300])
def test_an_unknown_empty_or_overlong_id_reads_as_none(under_test: StoreUnderTest, job_id: str) -> None:
    assert under_test.store.get(job_id) is None


def test_a_move_bumps_the_version_updates_the_callers_record_and_records_the_event(
    under_test: StoreUnderTest,
) -> None:
    store = under_test.store
    job = created(store)
    assert store.move(job, JobState.PLANNED, "planned", changes={"candidate_index": 3}, detail={"why": "x"})
    assert (job.state, job.version, job.candidate_index) == ("PLANNED", 1, 3)
    stored = store.get(job.job_id)
    assert stored is not None and (stored.state, stored.version, stored.candidate_index) == ("PLANNED", 1, 3)
    last = store.timeline(job.job_id)[-1]
    assert (last.kind, last.message, last.state, last.detail.as_dict()) == (
        "state",
        "planned",
        "PLANNED",
        {"why": "x"},
    )


def test_a_move_from_a_stale_read_changes_nothing(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job = created(store)
    stale = store.get(job.job_id)
    assert stale is not None
    assert store.move(job, JobState.PLANNED, "planned")
    cluster = cluster_of(store, stale, "i-1")
    assert not store.move(stale, JobState.CANCELLED, "late", changes={"reason": "late"}, also_save=[cluster])
    assert (stale.state, stale.version) == ("PENDING", 0)  # the caller's record is untouched too
    stored = store.get(job.job_id)
    assert stored is not None and (stored.state, stored.version, stored.reason) == ("PLANNED", 1, None)
    assert store.cluster(cluster.cluster_id) is None
    assert [e.message for e in store.timeline(job.job_id)] == ["submitted", "planned"]


def test_a_duplicate_move_from_the_same_read_succeeds_once(under_test: StoreUnderTest) -> None:
    store = under_test.store
    created(store)
    first, second = store.get("job-00000000000a"), store.get("job-00000000000a")
    assert first is not None and second is not None
    assert store.move(first, JobState.PLANNED, "planned")
    assert not store.move(second, JobState.PLANNED, "planned")


def test_an_illegal_move_raises_before_writing(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job = created(store)
    with pytest.raises(IllegalTransition):
        store.move(job, JobState.SUCCEEDED, "done?")
    stored = store.get(job.job_id)
    assert stored is not None and (stored.state, stored.version) == ("PENDING", 0)


def test_progress_is_version_checked_and_none_removes_a_field(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job = created(store, reason="old")
    stale = store.get(job.job_id)
    assert store.save_progress(job, {"candidate_index": 2, "reason": None}, "tried the next place")
    stored = store.get(job.job_id)
    assert stored is not None and (stored.state, stored.version, stored.candidate_index) == ("PENDING", 1, 2)
    assert stored.reason is None
    assert [(e.kind, e.state) for e in store.timeline(job.job_id)][-1] == ("note", "PENDING")
    assert store.save_progress(job, {"candidate_index": 4})  # no message: no event
    assert len(store.timeline(job.job_id)) == 2
    assert stale is not None and not store.save_progress(stale, {"candidate_index": 9})


def test_progress_writes_its_event_of_a_kind_with_a_detail_once_for_racing_copies(
    under_test: StoreUnderTest,
) -> None:
    store = under_test.store
    job = created(store)
    copy = store.get(job.job_id)
    facts = {"estimate": 7.2, "running": {"market": "spot", "hourly_price": 0.04}}
    assert store.save_progress(job, {"reason": "past"}, "ran past it", kind="overrun", detail=facts)
    assert copy is not None and not store.save_progress(copy, {"reason": "past"}, "again", kind="overrun")
    [event] = [e for e in store.timeline(job.job_id) if e.kind == "overrun"]
    assert (event.message, event.state, event.detail.as_dict()) == ("ran past it", "PENDING", facts)


def test_a_move_saves_its_cluster_and_node_refs_with_it(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job, cluster = launched(store, "i-b", "i-a")
    assert cluster is not None and cluster.job_id == job.job_id and cluster.use_spot
    ref = store.node_ref("i-a")
    assert ref is not None and (ref.job_id, ref.node_cluster, ref.rank) == (job.job_id, cluster.cluster_id, 1)
    assert store.node_ref("i-unknown") is None
    assert store.cluster(None) is None and store.cluster("") is None
    assert set(store.clusters_by_id([cluster.cluster_id, "job-none-0", cluster.cluster_id])) == {
        cluster.cluster_id
    }
    assert [c.cluster_id for c in store.live_clusters()] == [cluster.cluster_id]  # node refs are not clusters


def test_node_fields_go_with_the_move_or_not_at_all(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job, cluster = launched(store, "i-1")
    stale = store.get(job.job_id)
    assert store.move(
        job, JobState.RUNNING, "running", also_update=[NodeFields(cluster, "i-1", {"phase": "running"})]
    )
    fresh = store.cluster(cluster.cluster_id)
    assert fresh is not None and fresh.nodes["i-1"]["phase"] == "running"
    assert stale is not None
    assert not store.move(
        stale, JobState.FAILED, "x", also_update=[NodeFields(cluster, "i-1", {"phase": "failed"})]
    )
    fresh = store.cluster(cluster.cluster_id)
    assert fresh is not None and fresh.nodes["i-1"]["phase"] == "running"


def stored(cooldowns: Cooldowns) -> dict[str, list[str]]:
    """The record as written: each attribute's entries, counted or not."""
    assert isinstance(cooldowns, PrunedCooldowns)
    return cooldowns.record()


def prunes(cooldowns: Cooldowns, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entries each prune a read writes from now on removes, one number a write."""
    assert isinstance(cooldowns, PrunedCooldowns)
    written: list[int] = []
    forget = cooldowns._forget

    def counted(stale: dict[str, list[str]], kept_count: int | None) -> None:
        written.append(sum(len(listed) for listed in stale.values()))
        forget(stale, kept_count)

    monkeypatch.setattr(cooldowns, "_forget", counted)
    return written


def test_a_job_is_marked_as_refused_once_without_a_version_and_its_next_move_still_applies(
    under_test: StoreUnderTest,
) -> None:
    store = under_test.store
    job = created(store)
    stale = store.get(job.job_id)
    assert stale is not None and stale.refusals_noted is False  # a new job has noted none
    store.mark_refusals_noted(job)
    store.mark_refusals_noted(job)  # twice: the same
    marked = store.get(job.job_id)
    assert job.refusals_noted is True and marked is not None and marked.refusals_noted is True
    assert (marked.version, marked.updated_at) == (0, job.updated_at)
    assert store.move(stale, JobState.PLANNED, "planned")  # read before the mark: not in its way
    moved = store.get(job.job_id)
    assert moved is not None and moved.refusals_noted is True and moved.state == "PLANNED"


def test_marking_a_job_that_does_not_exist_writes_nothing(under_test: StoreUnderTest) -> None:
    store = under_test.store
    store.mark_refusals_noted(new_job(store, "job-0000000000ff"))
    assert store.get("job-0000000000ff") is None


def test_a_preemption_counted_twice_is_one_entry_and_one_past_the_horizon_is_not_counted(
    under_test: StoreUnderTest,
) -> None:
    _, cluster = launched(under_test.store, "i-1")
    at = time.time()
    under_test.cooldowns.preempted("aws", "us-east-1", "us-east-1a", cluster.cluster_id, at=at)
    under_test.cooldowns.preempted("aws", "us-east-1", "us-east-1a", cluster.cluster_id, at=at)
    under_test.cooldowns.preempted(
        "aws", "us-east-1", "us-east-1a", "job-old-0", at=at - FORGET_AFTER_SECONDS - 60
    )
    counted = under_test.cooldowns.preemptions()
    assert list(counted) == ["aws/us-east-1/us-east-1a"] and len(counted["aws/us-east-1/us-east-1a"]) == 1
    assert counted["aws/us-east-1/us-east-1a"][0].endswith("#" + cluster.cluster_id)
    assert (
        len(stored(under_test.cooldowns)["z#aws/us-east-1/us-east-1a"]) == 2
    )  # removed past the margin only


def test_refused_spot_launches_are_counted_beside_preemptions_until_the_horizon(
    under_test: StoreUnderTest,
) -> None:
    cooldowns = under_test.cooldowns
    now = float(int(time.time()))  # entries keep milliseconds
    cooldowns.refused("aws", "us-east-1", "us-east-1b", "job-a-0", at=now)
    cooldowns.refused("aws", "us-east-1", "us-east-1b", "job-b-2", at=now + 1)
    assert cooldowns.preemptions() == {}
    zone = {c.place: c for c in cooldowns.cooling(now=now + 2)}["aws/us-east-1/us-east-1b"]
    assert (zone.refusals, zone.preemptions, zone.last_refused) == (2, 0, now + 1)
    assert cooldowns.evidence(now + FORGET_AFTER_SECONDS + 60) == ([], {})  # no longer counted
    assert [c.place for c in cooldowns.cooling(now=now + 2)] == ["aws/us-east-1/us-east-1b"]  # nor removed


def test_a_zone_is_read_without_a_write_until_it_passes_the_margin_then_pruned_to_its_newest(
    under_test: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    cooldowns = under_test.cooldowns
    now = float(int(time.time()))

    def refused(n: int) -> None:
        cooldowns.refused("aws", "us-east-1", "us-east-1b", f"job-{n}-0", at=now - 100 + n)

    for n in range(KEPT_PER_ZONE):
        refused(n)
    written = prunes(cooldowns, monkeypatch)
    for n in range(KEPT_PER_ZONE, PRUNE_PAST_PER_ZONE):  # a refusal, then a plan's read, 16 times
        refused(n)
        _, refusals = cooldowns.evidence(now)
        newest = [f"job-{k}-0" for k in reversed(range(n + 1 - KEPT_PER_ZONE, n + 1))]
        assert [who for _, who in refusals["aws/us-east-1/us-east-1b"]] == newest
    assert written == []  # each read pruned the one entry past the newest 32 before
    assert len(stored(cooldowns)["r#aws/us-east-1/us-east-1b"]) == PRUNE_PAST_PER_ZONE

    refused(PRUNE_PAST_PER_ZONE)
    cooldowns.evidence(now)
    cooldowns.evidence(now)
    assert written == [PRUNE_PAST_PER_ZONE + 1 - KEPT_PER_ZONE]  # the first read past 48, once
    newest_set = {
        f"job-{n}-0" for n in range(PRUNE_PAST_PER_ZONE + 1 - KEPT_PER_ZONE, PRUNE_PAST_PER_ZONE + 1)
    }
    assert {e.split("#", 1)[1] for e in stored(cooldowns)["r#aws/us-east-1/us-east-1b"]} == newest_set


def test_the_record_is_read_without_a_write_until_it_passes_its_margin_then_pruned_to_its_newest(
    under_test: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    cooldowns = under_test.cooldowns
    now = float(int(time.time()))
    zones = 60  # none of them past KEPT_PER_ZONE

    def refuse(numbers: range) -> None:
        for n in numbers:
            cooldowns.refused("aws", f"r{n % zones}", f"r{n % zones}a", f"job-{n}-0", at=now - 2000 + n)

    refuse(range(KEPT_IN_ALL + 100))
    written = prunes(cooldowns, monkeypatch)
    _, refusals = cooldowns.evidence(now)
    assert sum(len(listed) for listed in refusals.values()) == KEPT_IN_ALL
    assert written == [] and sum(len(listed) for listed in stored(cooldowns).values()) == KEPT_IN_ALL + 100

    refuse(range(KEPT_IN_ALL + 100, PRUNE_PAST_IN_ALL + 1))
    cooldowns.evidence(now)
    cooldowns.evidence(now)
    assert written == [PRUNE_PAST_IN_ALL + 1 - KEPT_IN_ALL]
    kept = {e.split("#", 1)[1] for listed in stored(cooldowns).values() for e in listed}
    assert kept == {f"job-{n}-0" for n in range(PRUNE_PAST_IN_ALL + 1 - KEPT_IN_ALL, PRUNE_PAST_IN_ALL + 1)}


def test_a_zone_keeps_its_newest_entries_of_each_kind_whatever_the_history(
    under_test: StoreUnderTest,
) -> None:
    cooldowns = under_test.cooldowns
    now = float(int(time.time()))
    for n in range(WRITE_CAP * 3):  # no read in between: only the write's own cap holds the set
        cooldowns.refused("aws", "us-east-1", "us-east-1b", f"job-{n}-0", at=now - 1000 + n)
        cooldowns.preempted("aws", "us-east-1", "us-east-1b", f"job-{n}-0", at=now - 1000 + n)
    newest = [f"job-{n}-0" for n in reversed(range(WRITE_CAP * 3 - KEPT_PER_ZONE, WRITE_CAP * 3))]
    assert [e.split("#", 1)[1] for e in cooldowns.preemptions()["aws/us-east-1/us-east-1b"]] == newest
    _, refusals = cooldowns.evidence(now)
    assert [who for _, who in refusals["aws/us-east-1/us-east-1b"]] == newest


def test_the_record_keeps_its_newest_entries_whatever_the_number_of_zones(under_test: StoreUnderTest) -> None:
    cooldowns = under_test.cooldowns
    now = float(int(time.time()))
    writes = WRITE_CAP_IN_ALL + 200  # over 150 zones, none of them full, no read in between
    for n in range(writes):
        cooldowns.refused("aws", f"r{n % 150}", f"r{n % 150}a", f"job-{n}-0", at=now - writes + n)
    _, refusals = cooldowns.evidence(now)
    counted = {who for listed in refusals.values() for _, who in listed}
    assert counted == {f"job-{n}-0" for n in range(writes - KEPT_IN_ALL, writes)}


def test_update_node_answers_false_for_a_node_the_cluster_does_not_have(under_test: StoreUnderTest) -> None:
    store = under_test.store
    _, cluster = launched(store, "i-1")
    assert store.update_node(cluster, "i-1", phase="running", heartbeat_at=5.0)
    assert not store.update_node(cluster, "i-2", phase="running")
    fresh = store.cluster(cluster.cluster_id)
    assert fresh is not None and dict(fresh.nodes["i-1"]) == {
        "rank": 0,
        "phase": "running",
        "heartbeat_at": 5.0,
    }
    assert set(fresh.nodes.as_dict()) == {"i-1"}


def test_a_node_is_claimed_by_one_key_only(under_test: StoreUnderTest) -> None:
    store = under_test.store
    _, cluster = launched(store, "i-1")
    assert store.claim_node(cluster, "i-1", "boot_claim", "key-a")
    assert store.claim_node(cluster, "i-1", "boot_claim", "key-a")  # the same agent asking again
    assert not store.claim_node(cluster, "i-1", "boot_claim", "key-b")
    assert not store.claim_node(cluster, "i-9", "boot_claim", "key-a")
    fresh = store.cluster(cluster.cluster_id)
    assert fresh is not None and fresh.nodes["i-1"]["boot_claim"] == "key-a"


def test_a_cluster_is_marked_terminated_once(under_test: StoreUnderTest) -> None:
    store = under_test.store
    _, cluster = launched(store, "i-1")
    assert store.mark_cluster_terminated(cluster)
    assert not store.mark_cluster_terminated(cluster)
    fresh = store.cluster(cluster.cluster_id)
    assert fresh is not None and fresh.state == "TERMINATED" and fresh.terminated_at is not None
    assert store.live_clusters() == []
    assert not store.mark_cluster_terminated(cluster_of(store, new_job(store, "job-nothere"), "i-2"))


def test_queries_by_owner_time_and_state(under_test: StoreUnderTest) -> None:
    store = under_test.store
    ids = [f"job-00000000000{n}" for n in range(4)]
    for n, job_id in enumerate(ids):
        created(store, job_id, owner="bob" if n == 3 else "alice")
        time.sleep(0.01)
    middle = store.get(ids[1])
    assert middle is not None
    assert [j.job_id for j in store.jobs_of("alice")] == [ids[2], ids[1], ids[0]]
    assert [j.job_id for j in store.jobs_of("alice", limit=2)] == [ids[2], ids[1]]
    assert [j.job_id for j in store.iter_jobs_of("alice", since=middle.created_at)] == [ids[2], ids[1]]
    assert sorted(j.job_id for j in store.iter_all_jobs(since=middle.created_at)) == ids[1:]
    assert sorted(j.job_id for j in store.iter_all_jobs()) == ids
    done = store.get(ids[0])
    assert done is not None and store.move(done, JobState.CANCELLED, "cancelled")
    assert sorted(j.job_id for j in store.live_jobs()) == ids[1:]
    assert store.jobs_of("nobody") == []


def test_a_days_jobs_of_every_owner_newest_first_within_since_and_before(under_test: StoreUnderTest) -> None:
    store = under_test.store
    ids = [f"job-00000000001{n}" for n in range(4)]
    for n, job_id in enumerate(ids):
        created(store, job_id, owner=("alice", "bob", "carol", "bob")[n])
        time.sleep(0.01)
    jobs = [job for job in map(store.get, ids) if job is not None]
    assert len(jobs) == len(ids)
    day = jobs[-1].created_day
    assert day is not None
    on_day = [job.job_id for job in reversed(jobs) if job.created_day == day]  # all (one day)
    assert [j.job_id for j in store.iter_jobs_of_day(day, page_size=1)] == on_day
    within = store.iter_jobs_of_day(day, since=jobs[0].created_at, before=jobs[-1].created_at)
    assert [j.job_id for j in within] == on_day[1:]  # the newest is not before itself
    assert list(store.iter_jobs_of_day("2001-01-01")) == []


def test_notes_append_to_any_partition_in_time_order(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job = created(store)
    store.note(job.job_id, "node", "rank 0 booted", {"rank": 0})
    store.note("reaper", "reaper", "killed x")
    store.note(job.job_id, "block", "blocked a zone")
    assert [(e.kind, e.message, e.state) for e in store.timeline(job.job_id)] == [
        ("state", "submitted", "PENDING"), ("node", "rank 0 booted", None), ("block", "blocked a zone", None),
    ]  # fmt: skip
    assert [e.message for e in store.timeline("reaper")] == ["killed x"]
    assert store.timeline("job-none") == []


def test_a_read_record_is_a_copy(under_test: StoreUnderTest) -> None:
    store = under_test.store
    job, cluster = launched(store, "i-1")
    read = store.get(job.job_id)
    assert read is not None
    read.state, read.name = "RUNNING", "changed"
    cluster.state = "TERMINATED"
    stored = store.get(job.job_id)
    assert stored is not None and (stored.state, stored.name) == ("SETTING_UP", None)
    fresh = store.cluster(cluster.cluster_id)
    assert fresh is not None and fresh.state == "UP"


def _long_running(store: JobStore, hours: float, job_id: str = "job-00000000000a") -> Any:
    job = created(store, job_id)
    assert store.move(job, JobState.PLANNED, "planned")
    cluster = cluster_of(store, job, "i-1")
    cluster.hourly_price, cluster.num_nodes, cluster.launched_at = 0.5, 2, time.time() - hours * 3600
    assert store.move(job, JobState.SETTING_UP, "launched", also_save=[cluster])
    return store.cluster(cluster.cluster_id)


def _rolled_up(store: JobStore, owner: str | None, days_back: int) -> tuple[float, float, int, int]:
    today = time.strftime("%Y-%m-%d", time.gmtime())
    first = time.strftime("%Y-%m-%d", time.gmtime(time.time() - days_back * 86400))
    pieces = store.cost_pieces(first, today, owner)
    return (
        round(sum(p.cost for p in pieces), 4),
        round(sum(p.hours for p in pieces), 4),
        sum(p.attempts for p in pieces),
        sum(p.jobs for p in pieces),
    )


@pytest.mark.parametrize("hours", [3.0, 24 * 50.0])  # 50 days: two groups, the first under a marker
def test_an_attempt_ended_twice_is_rolled_up_once_for_its_owner_and_for_everyone(
    under_test: StoreUnderTest, hours: float
) -> None:
    from shared.store.cost_rollups import AttemptFacts

    store = under_test.store
    cluster = _long_running(store, hours)
    facts = AttemptFacts(owner="alice", on_demand_hourly=1.5, first_of_job=True)
    assert store.mark_cluster_terminated(cluster, facts)
    assert not store.mark_cluster_terminated(cluster, facts)  # a duplicate, late message: nothing added
    cost, rolled_hours, attempts, jobs = _rolled_up(store, "alice", 60)
    assert cost == pytest.approx(0.5 * 2 * hours, abs=0.01) and rolled_hours == pytest.approx(hours, abs=0.01)
    assert (attempts, jobs) == (1, 1)
    assert _rolled_up(store, None, 60) == (cost, rolled_hours, 1, 1)
    assert _rolled_up(store, "bob", 60) == (0.0, 0.0, 0, 0)
