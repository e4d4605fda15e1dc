"""The chaos run, small enough for CI: jobs through the real core operations with every message delivered
at least twice (shuffled, late), crashes before and after store/queue/cloud calls, capacity outages,
transient errors, zone-wide preemption storms and single nodes of two-node clusters taken away. Every
invariant must hold; `benchmarks/chaos.py` runs the same at 1,000 jobs.

DynamoDB is moto in this process (mock_aws): the same store code, without HTTP between it and the run, with
moto's whole-table copies and slow response serializer taken out (chaos.fast_moto; every 20th response and
each operation's first is also built moto's way, and must read the same)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos import fast_moto
from chaos.clock import SimClock
from chaos.run import ChaosConfig, run_chaos
from chaos.sim_cloud import Monitor
from moto import mock_aws

from shared.config import Settings
from shared.store.memory import MemoryJobStore
from shared.store.models import models_for

STORMY = {"preemptions_per_hour": 400.0, "storms_per_hour": 20.0, "crash_rate": 0.06, "work": 4}


@pytest.fixture
def chaos_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    fake = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in {**fake, "SKYLESS_AGENT_SECRET": "chaos"}.items():
        monkeypatch.setenv(name, value)
    fast_moto.install()
    fast_moto.verify(every=20)
    with mock_aws():
        settings = Settings(prefix=f"chaos{uuid.uuid4().hex[:8]}", home=tmp_path, providers="*=sim")
        for model in models_for(settings).all():
            model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        yield settings


def test_chaos_every_invariant_holds(chaos_settings: Settings) -> None:
    # the mix before droughts and their moves (the test below has those, on the faster store)
    kinds = ("simple", "spot", "spot-2-nodes", "spot-or-on-demand", "pipeline", "deadline")
    mix = dict(zip(kinds, (0.15, 0.3, 0.2, 0.1, 0.1, 0.15), strict=True))
    report = run_chaos(chaos_settings, ChaosConfig(jobs=12, seed=11, tasks=mix, drought_seconds=0, **STORMY))
    summary = report.summary()
    # the chaos happened ...
    assert report.crashes > 20 and report.crash_points == report.crash_points_possible, summary
    assert report.deliveries >= 2 * report.messages_sent, summary
    assert report.preemptions > 10 and report.storms >= 1, summary
    assert report.outcomes["SUCCEEDED"] >= report.jobs // 2, summary
    # ... and nothing broke
    assert report.lost == [] and report.stuck == [], summary
    assert report.unfenced_launches == {} and report.three_live_clusters == {}, summary
    assert report.extra_cluster_too_long == {}, summary
    assert report.two_running_tasks == {}, summary
    assert report.vms_left_after_reconcile == [] and report.vms_left_after_reaper == [], summary
    assert report.illegal_moves == [], summary
    assert report.handler_errors == [], report.handler_errors[:2]
    # ... and moto answered as moto does
    assert fast_moto.checked["verified"] > 100 and fast_moto.differences == [], fast_moto.differences[:2]


def test_chaos_moves_running_jobs_made_before_break_within_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deadline jobs that start on on-demand while spot is refused in their region, and are moved to spot
    (the new cluster obtained first) when it is offered again, under the same faults: the extra cluster
    the move boots is counted, and the bounds on it hold. On the memory store (the contract-tested twin of
    DynamoDB's), so the run is large enough to move several jobs."""
    monkeypatch.setenv("SKYLESS_AGENT_SECRET", "chaos")
    settings = Settings(prefix=f"chaos{uuid.uuid4().hex[:8]}", home=tmp_path, providers="*=sim",
                        endpoint_url="http://127.0.0.1:9")  # fmt: skip
    mix = {"deadline-move": 0.5, "spot": 0.3, "spot-2-nodes": 0.2}
    report = run_chaos(settings, ChaosConfig(jobs=60, seed=3, tasks=mix, **STORMY), MemoryJobStore())
    summary = report.summary()
    assert report.spot_refused > 0 and report.crashes > 40, summary  # the drought and the crashes happened
    assert report.moves_in_timelines >= 1, summary  # ... moves were made (3 to 7 in 40 jobs; once 0) ...
    assert report.extra_clusters >= report.moves_in_timelines and report.moves >= 1, summary
    assert report.extra_cluster_too_long == {} and report.extra_ran_task == {}, summary  # ... within bounds
    assert report.three_live_clusters == {} and report.two_running_tasks == {}, summary
    assert report.unfenced_launches == {} and report.lost == [] and report.stuck == [], summary
    assert report.vms_left_after_reconcile == [] and report.vms_left_after_reaper == [], summary
    assert report.illegal_moves == [] and report.handler_errors == [], report.handler_errors[:2]


def test_chaos_deadline_jobs_past_their_estimate_relaunch_only_on_demand_and_say_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deadline jobs whose tasks run past their `--hours` (a 5 s restart overhead, 18 s estimated, tasks of
    up to a minute), preempted often, under the same faults: every cluster launched after the job was seen
    past its estimate is on-demand, the timeline note is written at most once per job, and every invariant
    holds. On the memory store (the contract-tested twin of DynamoDB's)."""
    monkeypatch.setenv("SKYLESS_AGENT_SECRET", "chaos")
    settings = Settings(prefix=f"chaos{uuid.uuid4().hex[:8]}", home=tmp_path, providers="*=sim",
                        endpoint_url="http://127.0.0.1:9", restart_overhead_seconds=5)  # fmt: skip
    store = MemoryJobStore()
    mix = {"deadline-overrun": 0.7, "spot": 0.3}
    report = run_chaos(settings, ChaosConfig(jobs=30, seed=5, tasks=mix, drought_seconds=0, **STORMY), store)
    summary = report.summary()
    assert report.crashes > 20 and report.preemptions > 10, summary  # the chaos happened
    overran, after = 0, []
    for job in store.iter_all_jobs():
        if not job.deadline_at:
            continue
        notes = [e for e in store.timeline(job.job_id) if "ran its estimated" in e.message]
        assert len(notes) <= 1, (job.job_id, [e.message for e in notes])
        if job.overran_at is None:
            continue
        overran += 1
        clusters = (store.cluster(f"{job.job_id}-{n}") for n in range(int(job.attempt) + 1))
        after += [c for c in clusters if c is not None and float(c.launched_at) > float(job.overran_at)]
    assert overran >= 3 and len(after) >= 1, (overran, len(after), summary)  # the rule was exercised ...
    assert [c.cluster_id for c in after if c.use_spot] == [], summary  # ... and launched on-demand only
    assert report.lost == [] and report.stuck == [] and report.two_running_tasks == {}, summary
    assert report.unfenced_launches == {} and report.three_live_clusters == {}, summary
    assert report.vms_left_after_reconcile == [] and report.vms_left_after_reaper == [], summary
    assert report.illegal_moves == [] and report.handler_errors == [], report.handler_errors[:2]


def test_the_monitor_finds_a_task_started_on_an_extra_beside_a_live_earlier_cluster() -> None:
    """The checker's check: the made-before-break counts and findings from a hand-made cloud history."""
    clock = SimClock()
    monitor = Monitor(clock, attempt_of=lambda job_id: 0)
    monitor.cluster_changed("job-a", "job-a-0", True, 0)
    monitor.task_changed("job-a", "job-a-0", True)
    monitor.cluster_changed("job-a", "job-a-1", True, 1)  # made before break: booting beside the running one
    clock.advance(120)
    monitor.task_changed("job-a", "job-a-0", False)
    monitor.cluster_changed("job-a", "job-a-0", False)  # the break: the job moves onto the extra
    monitor.task_changed("job-a", "job-a-1", True)
    assert (monitor.extra_clusters, monitor.moves, monitor.extras_let_go) == (1, 1, 0)
    assert monitor.extra_ran_task == {} and monitor.unfenced_launches == {}
    assert 119 < monitor.extra_seconds < 121
    monitor.cluster_changed("job-b", "job-b-0", True, 0)
    monitor.cluster_changed("job-b", "job-b-1", True, 1)
    monitor.task_changed("job-b", "job-b-1", True)  # the extra's task began while -0 was still up
    clock.advance(901)
    monitor.close()
    assert monitor.extra_ran_task == {"job-b": ["job-b-0", "job-b-1"]}
    assert set(monitor.extra_cluster_too_long) == {"job-b"}


def test_fast_moto_answers_every_attribute_type_as_moto_does(chaos_settings: Settings) -> None:
    """The chaos run's shortcut through moto's response serializer, on every attribute type (binary ones
    are base64 on the wire) and every item operation the store uses: the same parsed answers."""
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])  # fmt: skip
    item = {"k": {"S": "a"}, "n": {"N": "1.5"}, "b": {"B": b"\x00\xff"}, "bs": {"BS": [b"x", b"y"]},
            "ss": {"SS": ["p", "q"]}, "ns": {"NS": ["1", "2"]}, "t": {"BOOL": True}, "z": {"NULL": True},
            "m": {"M": {"l": {"L": [{"S": "s"}, {"N": "3"}, {"B": b"z"}]}}}}  # fmt: skip
    fast_moto.verify(every=1)
    client.put_item(TableName="t", Item=item, ReturnValues="ALL_OLD")
    first = dict(item)
    key = {"k": {"S": "a"}}
    answers = [
        client.get_item(TableName="t", Key=key)["Item"],
        client.query(
            TableName="t", KeyConditionExpression="k = :k", ExpressionAttributeValues={":k": {"S": "a"}}
        )["Items"][0],
        client.batch_get_item(RequestItems={"t": {"Keys": [key]}})["Responses"]["t"][0],
        client.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET n = n + :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_OLD",
        )["Attributes"],
    ]
    item["n"] = {"N": "2.5"}
    answers.append(client.delete_item(TableName="t", Key=key, ReturnValues="ALL_OLD")["Attributes"])
    client.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": item}}])
    answers.append(client.get_item(TableName="t", Key=key, ConsistentRead=True)["Item"])
    assert answers == [first] * 4 + [item] * 2
    assert fast_moto.checked["verified"] == fast_moto.checked["fast"] >= 8, fast_moto.checked
    assert fast_moto.differences == [], fast_moto.differences


def test_the_chaos_clock_does_not_follow_the_real_one() -> None:
    """Real seconds a loaded machine takes between two steps are not simulated seconds: followed, they
    made running nodes look silent to reconcile (and their jobs fail) on the slow store at high load."""
    import time

    clock = SimClock(detached=True)
    with clock.installed():
        first = time.time()
        time.sleep(0.05)
        second = time.time()
        clock.advance(60)
        third = time.time()
    assert 0 < second - first < 0.001
    assert 60 <= third - second < 60.001


def test_a_chaos_run_is_a_function_of_its_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of one seed, in one process, with the module `random` in different states before each and
    real time passing between them, write the same jobs with the same timelines at the same instants: a
    finding can be replayed. (Before, the job ids were uuid4's, the clock began at the real time, and
    reconcile and the reaper shuffled with the unseeded module `random`: no two runs of a seed were alike.)
    The module `random` is given back as the run found it."""
    monkeypatch.setenv("SKYLESS_AGENT_SECRET", "chaos")
    config = ChaosConfig(
        jobs=12, seed=3, tasks={"deadline-move": 0.5, "spot": 0.3, "spot-2-nodes": 0.2}, **STORMY
    )
    runs = []
    for outside in (1, 2):
        random.seed(outside)
        before = random.getstate()
        settings = Settings(prefix=f"chaos{uuid.uuid4().hex[:8]}", home=tmp_path, providers="*=sim",
                            endpoint_url="http://127.0.0.1:9")  # fmt: skip
        store = MemoryJobStore()
        report = run_chaos(settings, config, store)
        assert random.getstate() == before
        timelines = {
            job.job_id: [(_instant(e.at), e.kind, e.state, e.message) for e in store.timeline(job.job_id)]
            for job in store.iter_all_jobs()
        }
        runs.append((report.summary(), sorted(report.crashed_at), timelines))
    assert report.crashes > 20 and len(runs[0][2]) == 12, report.summary()  # the chaos happened
    assert runs[0] == runs[1]


def _instant(event_key: str) -> str:
    """An event key without its note's uuid4 suffix (`<at>#<8 hex>`: what keeps two keys apart, not read)."""
    at, _, tail = event_key.partition("#")
    return event_key if tail.startswith("v") else at
