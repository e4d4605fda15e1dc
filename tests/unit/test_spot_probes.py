"""Spot probes (shared/optimizer/probes.py): a zone's wait grows with every job's refused launches there and
decays with time; a job's own refused launches are bounded per hour; the policy sees a place it may not
probe yet as refused, and only for that decision."""

from __future__ import annotations

from pytest import approx

from shared.jobs.deadlines import place_key, probe_view
from shared.optimizer.plan import Candidate
from shared.optimizer.probes import MAX_PROBE_GAP_SECONDS, SpotProbes, spot_probes, with_refusal
from shared.spot_policy import SpotHistory
from shared.store.memory import MemoryJobStore

ZONE = "aws/us-east-1/us-east-1a"
OTHER = "aws/us-east-1/us-east-1b"
RETRY = 300.0


def test_one_refusal_waits_the_retry_and_a_long_outage_waits_longer_for_every_job():
    one = spot_probes({ZONE: [(1000.0, "a-1")]}, "b", 1001.0, retry=RETRY, per_hour=0)
    assert one.not_before(ZONE) == 1300.0  # job b waits on job a's refusal: the evidence is shared
    assert one.not_before(OTHER) is None

    outage = [(1000.0 + 300 * i, f"j{i % 3}-1") for i in range(12)]  # an hour of refusals, three jobs
    last = outage[-1][0]
    long = spot_probes({ZONE: outage}, "b", last + 1, retry=RETRY, per_hour=0)
    wait = long.not_before(ZONE)
    assert wait is not None and RETRY * 3 < wait - last <= MAX_PROBE_GAP_SECONDS


def test_the_wait_decays_with_time():
    outage = [(1000.0 + 60 * i, "a-1") for i in range(10)]
    later = outage[-1][0] + 4 * 3600
    assert spot_probes({ZONE: outage}, "b", later, retry=RETRY, per_hour=0).not_before(ZONE) is None
    again = with_refusal({ZONE: outage}, ZONE, later, "a-1")
    assert spot_probes(again, "b", later + 1, retry=RETRY, per_hour=0).not_before(ZONE) == approx(
        later + RETRY, abs=1
    )


def test_a_job_is_refused_at_most_its_hourly_limit_in_any_hour():
    per_hour = 4
    refusals: dict[str, list[tuple[float, str]]] = {}
    now, refused = 0.0, []
    while now < 5 * 3600:
        probes = spot_probes(refusals, "a", now, retry=RETRY, per_hour=per_hour)
        zone = ZONE if len(refused) % 2 else OTHER
        if probes.not_before(zone) is None:  # every probe is refused: spot never comes back
            refusals = with_refusal(refusals, zone, now, "a-3")
            refused.append(now)
        now += 30
    assert refused
    assert max(sum(1 for t in refused if start <= t < start + 3600) for start in refused) <= per_hour
    others = spot_probes(refusals, "b", now, retry=RETRY, per_hour=per_hour)
    assert others.budget.used == 0  # another job's budget is its own


def test_status_lines_name_the_zone_its_refusals_and_the_next_probe():
    refusals = {ZONE: [(1000.0, "a-1"), (1100.0, "b-1"), (1200.0, "a-1")]}
    probes = spot_probes(refusals, "a", 1260.0, retry=RETRY, per_hour=2)
    lines = probes.lines([ZONE, OTHER])
    assert lines[0].startswith(f"spot in {ZONE}: 3 refusal(s) in the last 10 min; next probe in ")
    assert "the limit of 2/h" in lines[1]
    assert spot_probes({}, "a", 0.0, retry=RETRY, per_hour=2).lines([ZONE]) == []


def _candidate(zone: str) -> Candidate:
    return Candidate(cloud="aws", region="us-east-1", zone=zone, instance_type="m5.large", use_spot=True,
                     hourly_price=0.03, num_nodes=1, accelerator=None, accelerator_count=0, vcpus=2,
                     memory_gib=8, estimated_hours=1, estimated_cost=0.03)  # fmt: skip


def test_the_policy_sees_a_zone_it_may_not_probe_as_refused_until_then_and_the_history_is_unchanged():
    by_key = {
        place_key("aws", "us-east-1", z, "m5.large"): _candidate(z) for z in ("us-east-1a", "us-east-1b")
    }
    here, there = by_key
    history = {here: SpotHistory(last_available=10.0)}
    probes = spot_probes({ZONE: [(1000.0, "x-1")]}, "a", 1001.0, retry=RETRY, per_hour=0)
    seen = probe_view(history, by_key, probes, RETRY)
    assert seen[here].unavailable_at(1299.0, RETRY) and not seen[here].unavailable_at(1300.0, RETRY)
    assert there not in seen and history == {here: SpotHistory(last_available=10.0)}

    ran_since = {here: SpotHistory(last_available=1000.5)}  # this job got spot there after the refusal
    assert probe_view(ran_since, by_key, probes, RETRY) == ran_since


def test_when_every_zone_waits_or_the_limit_is_reached_the_policy_sees_no_spot():
    key = place_key("aws", "us-east-1", "us-east-1a", "m5.large")
    by_key = {key: _candidate("us-east-1a")}
    probes = spot_probes({ZONE: [(1000.0, "x-1")]}, "a", 1001.0, retry=RETRY, per_hour=0)
    assert probe_view({}, by_key, probes, RETRY)[key].unavailable_at(1001.0, RETRY)
    spent = spot_probes({OTHER: [(1000.0, "a-1")]}, "a", 1001.0, retry=RETRY, per_hour=1)
    assert spent.budget_until() == 4600.0 and spent.not_before(ZONE) == 4600.0
    seen = probe_view({key: SpotHistory(last_available=1000.5)}, by_key, spent, RETRY)[key]
    assert seen.unavailable_at(4599.0, RETRY) and not seen.unavailable_at(4600.0, RETRY)


def test_a_zones_wait_for_a_job_counts_only_the_refusals_since_it_last_got_spot_there_its_budget_all():
    """An hour of refusals, then this job got spot in the zone and ran 20 min until a preemption: the first
    refusal after it waits the retry (a new outage), not the backoff of the outage before; another job,
    which has not seen spot there, keeps the backoff; the job's hourly limit still counts every refusal."""
    from shared.config import Settings
    from shared.jobs.deadlines import job_probes

    key = place_key("aws", "us-east-1", "us-east-1a", "m5.large")
    outage = [(1000.0 + 300 * i, "a-0") for i in range(12)]  # this job's refusals in the zone
    launched = outage[-1][0] + 60
    after = launched + 1200 + 300
    refusals = with_refusal({ZONE: outage}, ZONE, after, "a-1")
    settings = Settings(deadline_retry_seconds=300, spot_refusals_per_hour=12)
    history = {key: SpotHistory(last_available=launched)}

    def probes(job_id: str, now: float, seen: dict[str, SpotHistory]) -> SpotProbes:
        return job_probes(settings, job_id, refusals, now, seen)

    assert probes("a", after + 1, history).not_before(ZONE) == approx(after + RETRY)
    wait = probes("b", after + 1, {}).not_before(ZONE)
    assert wait is not None and wait - after > 2 * RETRY  # the older refusals still count (decayed)
    assert probes("a", launched, history).budget_until() is not None  # 12 in the last hour: limit holds
    status = probes("a", after + 1, history).lines([ZONE])  # what `status` says
    assert status[0].endswith("next probe in 5 min"), status


def test_a_refusal_is_kept_to_the_microsecond_so_a_wait_begun_after_it_outlasts_its_zones_wait():
    """A job refused in a zone waits the retry from the moment it decided, just after the refusal; kept to
    the millisecond, the refusal read back up to half a millisecond later, the zone's wait outlasted the
    job's by that much, and the job woke to a zone it might not probe: another full retry lost."""
    store = MemoryJobStore()
    refused_at = 1795000000.0008
    store.cooldowns.refused("aws", "us-east-1", "us-east-1a", "job-1-0", at=refused_at)
    decided = refused_at + 2e-6  # the same step, a moment later: the policy's Wait begins here
    _, refusals = store.cooldowns.evidence(decided)
    assert refusals[ZONE] == [(approx(refused_at, abs=1e-6), "job-1-0")]
    woken = spot_probes(refusals, "job-1", decided + RETRY, retry=RETRY, per_hour=12)
    assert woken.not_before(ZONE) is None
