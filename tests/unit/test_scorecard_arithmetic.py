"""The provider scorecard over hand-made timelines: every figure checked against a count made by hand."""

from __future__ import annotations

from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.jobs.cost_report import ClusterRecord, JobRecord
from shared.reports.provider_scorecard import JobHistory, TimelineEvent, build_scorecard

T0 = 1_800_000_000.0
CATALOG = Catalog(
    [
        Offering("aws", "us-east-1", "us-east-1a", "g5.xlarge", "A10G", 1, 24, 4, 16, 1.0, 0.3),
        Offering("gcp", "us-central1", "us-central1-a", "g2-standard-4", "L4", 1, 24, 4, 16, 0.8, 0.25),
    ]
)


def job(job_id: str, attempt: int) -> JobRecord:
    return JobRecord(job_id=job_id, owner="u1", name=None, state="SUCCEEDED", attempt=attempt, created_at=T0)


def cluster(
    job_id: str,
    attempt: int,
    cloud: str,
    region: str,
    itype: str,
    *,
    spot: bool,
    price: float,
    start: float,
    end: float,
    nodes: int = 1,
) -> ClusterRecord:
    return ClusterRecord(
        cluster_id=f"{job_id}-{attempt}",
        job_id=job_id,
        attempt=attempt,
        cloud=cloud,
        region=region,
        zone=None,
        instance_type=itype,
        use_spot=spot,
        hourly_price=price,
        num_nodes=nodes,
        launched_at=start,
        terminated_at=end,
    )


def state(at: float, to: str, **detail: object) -> TimelineEvent:
    return TimelineEvent(at=at, kind="state", state=to, message=f"-> {to}", detail=detail)


def refused(at: float, cloud: str, region: str, itype: str, error: str) -> TimelineEvent:
    detail = {"cloud": cloud, "region": region, "instance_type": itype, "error": error}
    return TimelineEvent(at=at, kind="refused", state=None, message="refused", detail=detail)


def seeded() -> list[JobHistory]:
    # job a: aws refuses twice for capacity and once for quota, then gcp launches (spot, 2 nodes),
    # RUNNING 90 s later; preempted with a warning after 1 h; attempt 1 on aws spot, RUNNING after 30 s,
    # preempted without warning after 2 h; attempt 2 on aws on-demand, RUNNING after 60 s, 1 h, done.
    a = JobHistory(
        job("a", 2),
        (
            cluster(
                "a",
                0,
                "gcp",
                "us-central1",
                "g2-standard-4",
                spot=True,
                price=0.25,
                start=T0 + 10,
                end=T0 + 10 + 3600,
                nodes=2,
            ),
            cluster(
                "a",
                1,
                "aws",
                "us-east-1",
                "g5.xlarge",
                spot=True,
                price=0.3,
                start=T0 + 4000,
                end=T0 + 4000 + 7200,
            ),
            cluster(
                "a",
                2,
                "aws",
                "us-east-1",
                "g5.xlarge",
                spot=False,
                price=1.0,
                start=T0 + 12000,
                end=T0 + 12000 + 3600,
            ),
        ),
        (
            refused(T0 + 1, "aws", "us-east-1", "g5.xlarge", "no capacity"),
            refused(T0 + 2, "aws", "us-east-1", "g5.2xlarge", "no capacity"),
            refused(T0 + 3, "aws", "us-east-1", "g5.xlarge", "quota"),
            state(T0 + 10, "SETTING_UP"),
            state(T0 + 100, "RUNNING"),
            state(T0 + 3610, "RECOVERING", cluster="a-0", preempted=True, restart=False, warned=True),
            state(T0 + 4000, "SETTING_UP"),
            state(T0 + 4030, "RUNNING"),
            state(T0 + 11200, "RECOVERING", cluster="a-1", preempted=True, restart=False, warned=False),
            state(T0 + 12000, "SETTING_UP"),
            state(T0 + 12060, "RUNNING"),
            state(T0 + 15600, "SUCCEEDED"),
        ),
    )
    # job b: aws on-demand; its task fails once (a restart: not the provider's fault), then a node is lost
    # (a node failure), then the job fails because a node went silent (another node failure).
    b = JobHistory(
        job("b", 2),
        (
            cluster("b", 0, "aws", "us-east-1", "g5.xlarge", spot=False, price=1.0, start=T0, end=T0 + 1800),
            cluster(
                "b", 1, "aws", "us-east-1", "g5.xlarge", spot=False, price=1.0, start=T0 + 2000, end=T0 + 3800
            ),
            cluster(
                "b", 2, "aws", "us-east-1", "g5.xlarge", spot=False, price=1.0, start=T0 + 4000, end=T0 + 5800
            ),
        ),
        (
            state(T0 + 120, "RUNNING"),
            state(T0 + 1800, "RECOVERING", cluster="b-0", preempted=False, restart=True, warned=False),
            state(T0 + 2120, "RUNNING"),
            state(T0 + 3800, "RECOVERING", cluster="b-1", preempted=False, restart=False, warned=False),
            state(T0 + 4100, "RUNNING"),
            state(T0 + 5800, "FAILED", cluster="b-2", node_failure=True),
        ),
    )
    # job c: gcp refuses for capacity everywhere; never launched.
    c = JobHistory(job("c", 0), (), (refused(T0, "gcp", "us-central1", "g2-standard-4", "no capacity"),))
    return [a, b, c]


def test_the_scorecard_counts_what_each_place_delivered() -> None:
    card = build_scorecard(seeded(), CATALOG, since=T0 - 10, now=T0 + 20000, days=1)
    lines = {line.key: line for line in card.lines}
    assert set(lines) == {("aws", "us-east-1", "g5"), ("gcp", "us-central1", "g2")}
    assert card.jobs_read == 3

    aws = lines[("aws", "us-east-1", "g5")]
    # requests: a's 3 refusals + a-1 + a-2 launches; b's 3 launches
    assert (aws.launch_requests, aws.launches, aws.capacity_refusals, aws.other_refusals) == (8, 5, 2, 1)
    assert aws.refusal_rate == round(3 / 8, 4)
    assert sorted(aws.seconds_to_running) == [30, 60, 100, 120, 120]  # a-1, a-2, b-2, b-0, b-1
    assert aws.median_seconds_to_running == 100 and aws.max_seconds_to_running == 120
    assert aws.spot_hours == 2.0  # a-1: 1 node for 2 h
    assert (aws.preemptions, aws.warned_preemptions) == (1, 0)
    assert aws.preemptions_per_spot_hour == 0.5
    assert aws.node_failures == 2  # b-1 lost, b-2 silent; b-0 was the task's own failure
    # paid: a-1 0.3*2 + a-2 1.0*1 + b 3*0.5 = 3.1; list: a-1 1.0*2 + 1.0 + 1.5 = 4.5
    assert aws.cost == 3.1 and aws.list_cost == 4.5
    assert aws.percent_of_list == round(100 * 3.1 / 4.5, 1)

    gcp = lines[("gcp", "us-central1", "g2")]
    assert (gcp.launch_requests, gcp.launches, gcp.capacity_refusals, gcp.other_refusals) == (2, 1, 1, 0)
    assert gcp.seconds_to_running == [90]
    assert gcp.spot_hours == 2.0  # 2 nodes for 1 h
    assert (gcp.preemptions, gcp.warned_preemptions, gcp.node_failures) == (1, 1, 0)
    assert gcp.preemptions_per_spot_hour == 0.5
    assert gcp.cost == 0.5 and gcp.list_cost == 1.6 and gcp.percent_of_list == 31.2


def test_a_recovery_written_before_the_flags_counts_as_preemption_only_on_spot() -> None:
    old = JobHistory(
        job("d", 1),
        (
            cluster("d", 0, "aws", "us-east-1", "g5.xlarge", spot=True, price=0.3, start=T0, end=T0 + 3600),
            cluster(
                "d", 1, "aws", "us-east-1", "g5.xlarge", spot=False, price=1.0, start=T0 + 3700, end=T0 + 7300
            ),
        ),
        (
            TimelineEvent(
                T0 + 3600,
                "state",
                "RECOVERING",
                "spot interruption warning (node rank 0)",
                {"cluster": "d-0"},
            ),
            TimelineEvent(T0 + 7300, "state", "RECOVERING", "node rank 0 is gone", {"cluster": "d-1"}),
        ),
    )
    line = build_scorecard([old], CATALOG, since=T0, now=T0 + 8000, days=1).lines[0]
    assert (line.preemptions, line.node_failures) == (1, 1)


def test_no_history_is_an_empty_scorecard() -> None:
    card = build_scorecard([], CATALOG, since=T0, now=T0 + 1, days=1)
    assert card.lines == [] and card.jobs_read == 0
