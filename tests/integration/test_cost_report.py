"""Cost reports: the pure arithmetic (per attempt, against on-demand, grouped, split by day), then the same
through `GET /costs`, `skyless cost-report` and `skyless queue` as a user types them."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.transactions import TransactWrite
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.config import Settings
from shared.jobs.cost_report import ClusterRecord, JobRecord, build_report, cost_report, split_by_day
from shared.jobs.outcomes import Outcome
from shared.jobs.provisioning import teardown_cluster
from shared.jobs.rollup_backfill import backfill_rollups
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.store.cost_rollup_items import add_pieces, marker, read_pieces, rollup_model
from shared.store.cost_rollups import END_MARK, CostPiece
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "220"}
HOUR = 3600.0
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC).timestamp()
CATALOG = Catalog(
    [
        Offering("aws", "us-east-1", "us-east-1a", "c6i.2xlarge", None, 0, None, 8, 16, 0.34, 0.136),
        Offering("gcp", "us-central1", "us-central1-a", "n2-standard-8", None, 0, None, 8, 32, 0.39, 0.09),
    ]
)


def job(job_id: str, owner: str = "u-a", attempt: int = 0, name: str = "train") -> JobRecord:
    return JobRecord(job_id, owner, name, "SUCCEEDED", attempt, NOW - 10 * HOUR)


def cluster(
    job_id: str,
    attempt: int,
    *,
    cloud: str = "aws",
    spot: bool = True,
    start: float,
    hours: float,
    nodes: int = 1,
    price: float | None = None,
    live: bool = False,
) -> ClusterRecord:
    place = {
        "aws": ("us-east-1", "us-east-1a", "c6i.2xlarge", 0.136, 0.34),
        "gcp": ("us-central1", "us-central1-a", "n2-standard-8", 0.09, 0.39),
    }[cloud]
    hourly = price if price is not None else (place[3] if spot else place[4])
    return ClusterRecord(
        f"{job_id}-{attempt}",
        job_id,
        attempt,
        cloud,
        place[0],
        place[1],
        place[2],
        spot,
        hourly,
        nodes,
        start,
        None if live else start + hours * HOUR,
    )


def test_a_spot_attempt_is_priced_against_the_same_places_on_demand_price() -> None:
    report = build_report(
        [job("job-1")],
        [cluster("job-1", 0, start=NOW - 5 * HOUR, hours=2, nodes=2)],
        CATALOG,
        by="cloud",
        since=NOW - 7 * 86400,
        now=NOW,
        days=7,
    )

    (attempt,) = report.jobs[0].attempts
    assert attempt.cost == pytest.approx(0.136 * 2 * 2)
    assert attempt.on_demand_cost == pytest.approx(0.34 * 2 * 2)
    assert attempt.savings == pytest.approx((0.34 - 0.136) * 4)
    (line,) = report.lines
    assert (line.key, line.jobs, line.attempts) == ("aws", 1, 1)
    assert line.spot_cost == pytest.approx(0.544) and line.on_demand_market_cost == 0
    assert line.savings_percent == pytest.approx(60.0)


def test_a_preempted_then_on_demand_job_has_two_attempts_and_saves_only_on_the_spot_one() -> None:
    clusters = [
        cluster("job-1", 0, start=NOW - 6 * HOUR, hours=1),  # spot, preempted after an hour
        cluster("job-1", 1, spot=False, start=NOW - 5 * HOUR, hours=3),  # then on-demand
    ]
    report = build_report([job("job-1", attempt=1)], clusters, CATALOG, by="job", since=0, now=NOW, days=7)

    first, second = report.jobs[0].attempts
    assert (first.market, second.market) == ("spot", "on-demand")
    assert second.savings == 0 and second.on_demand_cost == second.cost == pytest.approx(1.02)
    assert report.total.cost == pytest.approx(0.136 + 1.02)
    assert report.total.on_demand_cost == pytest.approx(0.34 + 1.02)
    assert report.lines[0].label == "job-1 train"


def test_a_place_the_catalog_does_not_price_claims_no_savings() -> None:
    odd = ClusterRecord(
        "job-1-0", "job-1", 0, "aws", "eu-west-9", None, "x9.huge", True, 1.0, 1, NOW - HOUR, NOW
    )
    report = build_report([job("job-1")], [odd], CATALOG, by="cloud", since=0, now=NOW, days=7)

    (attempt,) = report.jobs[0].attempts
    assert not attempt.on_demand_known and attempt.savings == 0 and attempt.cost == pytest.approx(1.0)


def test_a_live_attempt_is_counted_up_to_now() -> None:
    report = build_report(
        [job("job-1")],
        [cluster("job-1", 0, start=NOW - 0.5 * HOUR, hours=0, live=True)],
        CATALOG,
        by="cloud",
        since=0,
        now=NOW,
        days=7,
    )
    (attempt,) = report.jobs[0].attempts
    assert attempt.ended_at is None and attempt.hours == pytest.approx(0.5)


def test_grouping_by_user_names_users_and_by_day_splits_at_midnight() -> None:
    midnight = datetime(2026, 11, 20, tzinfo=UTC).timestamp()
    jobs = [job("job-a", owner="u-a"), job("job-b", owner="u-b")]
    clusters = [
        cluster("job-a", 0, start=midnight - HOUR, hours=3),
        cluster("job-b", 0, cloud="gcp", start=midnight + HOUR, hours=1),
    ]
    by_user = build_report(
        jobs,
        clusters,
        CATALOG,
        by="user",
        since=0,
        now=NOW,
        days=7,
        user_names={"u-a": "alice", "u-b": "bob"},
    )
    by_day = build_report(jobs, clusters, CATALOG, by="day", since=0, now=NOW, days=7)

    assert {line.label for line in by_user.lines} == {"alice", "bob"}
    assert [line.key for line in by_day.lines] == ["2026-11-19", "2026-11-20"]
    assert by_day.lines[0].cost == pytest.approx(0.136)  # one of job-a's three hours was on the 19th
    assert by_day.lines[1].cost == pytest.approx(0.136 * 2 + 0.09)
    assert by_day.lines[1].jobs == 2
    assert ("2026-11-20", "gcp", pytest.approx(0.09)) in [(d, c, v) for d, c, v in by_day.daily]


@given(start=st.floats(0, 40 * 86400), hours=st.floats(0, 200))
def test_splitting_by_day_keeps_every_cent(start: float, hours: float) -> None:
    report = build_report(
        [job("job-1")],
        [cluster("job-1", 0, start=NOW - 50 * 86400 + start, hours=hours)],
        CATALOG,
        by="cloud",
        since=0,
        now=NOW,
        days=7,
    )
    (attempt,) = report.jobs[0].attempts
    parts = split_by_day(attempt, NOW)
    assert sum(cost for _, cost, _ in parts) == pytest.approx(attempt.cost, abs=1e-9)
    assert sum(od for _, _, od in parts) == pytest.approx(attempt.on_demand_cost, abs=1e-9)
    assert sorted(day for day, _, _ in parts) == [day for day, _, _ in parts]


def test_an_unknown_grouping_is_refused() -> None:
    with pytest.raises(ValueError, match="cloud, user, job, day"):
        build_report([], [], CATALOG, by="zone", since=0, now=NOW, days=7)


# -------------------------------------------------------------------------- through the API and the CLI


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def _finished_job(
    stack: Settings,
    owner: str,
    name: str,
    *,
    spot: bool = True,
    hours: float = 1.0,
    cloud: str = "aws",
    before_rollups: bool = False,
) -> str:
    """A job that ran one attempt (its cluster record) on the built-in catalog's c6i.2xlarge."""
    task = f"name: {name}\nresources:\n  cpus: 8\n  use_spot: {str(spot).lower()}\nrun: echo\n"
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner=owner, task_text=task)).job_id
    store = wiring_for(stack).store
    record = store.get(job_id)
    assert record is not None
    now = time.time()
    cluster = store.new_cluster(
        cluster_id=f"{job_id}-0",
        job_id=job_id,
        attempt=0,
        provider="local",
        cloud=cloud,
        region="us-east-1",
        zone="us-east-1a",
        instance_type="c6i.2xlarge",
        use_spot=spot,
        hourly_price=0.136 if spot else 0.34,
        num_nodes=1,
        state="UP",
        launched_at=now - hours * HOUR,
    )
    for state in (
        JobState.PLANNED,
        JobState.PROVISIONING,
        JobState.SETTING_UP,
        JobState.RUNNING,
        JobState.SUCCEEDED,
    ):
        if record.state == state.value:
            continue  # planned at submit already
        changes: dict[str, object] = {"cluster_id": f"{job_id}-0"}
        if state == JobState.SUCCEEDED:  # what the lifecycle records when the job lets its cluster go
            changes["cost"] = round((0.136 if spot else 0.34) * hours, 6)
        also = [cluster] if state == JobState.SETTING_UP else []
        assert store.move(record, state, state.value.lower(), changes=changes, also_save=also)
    if before_rollups:  # ended by code from before cost rollups: the record's end, nothing rolled up
        ended = store.cluster(f"{job_id}-0")
        assert ended is not None and store.mark_cluster_terminated(ended)
        return job_id
    # the provision function's teardown step: the record ends, and its cost goes to the rollups
    assert teardown_cluster(wiring_for(stack), job_id, f"{job_id}-0") == Outcome.DONE
    return job_id


def _owner(stack: Settings, cli_api: list[str]) -> str:
    user = find_user(cli_api[3], stack)
    assert user is not None
    return user.user_id


def test_cost_report_prints_each_clouds_cost_against_on_demand(stack: Settings, cli_api: list[str]) -> None:
    owner = _owner(stack, cli_api)
    spot_job = _finished_job(stack, owner, "spot-train", hours=2)
    _finished_job(stack, owner, "od-train", spot=False, hours=1)
    _finished_job(stack, "u-someone-else", "not-mine")

    result = _run("cost-report", "--days", "7", *cli_api)

    assert result.exit_code == 0, result.output
    assert "Cost of your jobs in the last 7 UTC day(s), by cloud" in result.output
    line = next(row for row in result.output.splitlines() if row.strip("│ ").startswith("aws"))
    # spot: 2 h x $0.136, on-demand: 1 h x $0.34; all on-demand would be 3 h x $0.34
    # (the attempts end at their teardown, a few seconds after the hours asked: compared to the cent)
    cells = [cell.strip() for cell in line.strip("│ ").split("│")]
    spot, on_demand, cost, if_on_demand = (float(c.lstrip("$")) for c in cells[4:8])
    assert (spot, on_demand, cost, if_on_demand) == pytest.approx((0.272, 0.34, 0.612, 1.02), abs=0.005)
    assert cells[8].endswith("(40%)")
    assert spot_job in result.output and "not-mine" not in result.output


def test_cost_report_by_job_as_json_and_admin_only_across_users(stack: Settings, cli_api: list[str]) -> None:
    owner = _owner(stack, cli_api)
    mine = _finished_job(stack, owner, "mine")
    theirs = _finished_job(stack, "u-other", "theirs")

    as_json = _run("cost-report", "--by", "job", "--json", *cli_api)
    refused = _run("cost-report", "--all-users", *cli_api)
    admin = ["--api-url", cli_api[1], "--api-key", create_user("lead", stack, admin=True)]
    across = _run("cost-report", "--all-users", "--by", "user", "--no-jobs", *admin)

    report = json.loads(as_json.output)
    assert [line["key"] for line in report["lines"]] == [mine]
    assert report["jobs"][0]["attempts"][0]["market"] == "spot"
    assert refused.exit_code == 2 and "admin" in refused.output
    assert across.exit_code == 0, across.output
    assert "every user's jobs" in across.output and "u-other" in across.output and "cli-user" in across.output
    assert theirs not in across.output  # --no-jobs: the grouping only


def test_a_stack_made_before_rollups_gets_its_past_attempts_rolled_up_once_by_the_backfill(
    stack: Settings, cli_api: list[str]
) -> None:
    owner = _owner(stack, cli_api)
    _finished_job(stack, owner, "after-upgrade", spot=False, hours=1)  # rolled up by its teardown
    _finished_job(stack, owner, "before-upgrade", spot=False, hours=2, before_rollups=True)
    missing = cost_report(stack, owner=owner, days=7)

    assert backfill_rollups(stack, always=True) == 1  # the one attempt no rollup counted
    assert backfill_rollups(stack, always=True) == 0  # a second run, or one after a crash: nothing twice
    assert backfill_rollups(stack) == 0  # a completed run is remembered: create_stack reads no history again
    report = cost_report(stack, owner=owner, days=7)

    assert missing.total.cost == pytest.approx(0.34, abs=1e-3) and missing.total.jobs == 1
    assert report.total.cost == pytest.approx(3 * 0.34, abs=1e-3) and report.total.jobs == 2


def test_the_backfill_counts_neither_an_attempt_flagged_rolled_up_nor_one_with_an_end_marker_item(
    stack: Settings, cli_api: list[str]
) -> None:
    """The live path flags the cluster record; a stack from before the flag put an `end` marker item."""
    owner = _owner(stack, cli_api)
    flagged = _finished_job(stack, owner, "flagged", spot=False, hours=1)
    legacy = _finished_job(stack, owner, "legacy", spot=False, hours=1, before_rollups=True)
    rollups = rollup_model(stack)
    marker(rollups, f"{legacy}-0", END_MARK, int(time.time()) + 3600).save()  # as the old live path wrote it
    before = cost_report(stack, owner=owner, days=7)

    assert backfill_rollups(stack, always=True) == 0

    record = wiring_for(stack).store.cluster(f"{flagged}-0")
    assert record is not None and record.rolled_up
    assert cost_report(stack, owner=owner, days=7).total.cost == pytest.approx(before.total.cost)


def test_cost_report_refuses_a_bad_grouping_naming_the_option(cli_api: list[str]) -> None:
    result = _run("cost-report", "--by", "zone", *cli_api)
    assert result.exit_code == 2 and "--by" in result.output and "Traceback" not in result.output


def test_queue_shows_cost_and_source_and_filters(stack: Settings, cli_api: list[str], tmp_path: Path) -> None:
    owner = _owner(stack, cli_api)
    done = _finished_job(stack, owner, "alpha-train", hours=1)
    (tmp_path / "t.yaml").write_text("name: beta-eval\nresources:\n  cpus: 1+\nrun: echo\n")
    launched = _run("launch", str(tmp_path / "t.yaml"), "--detach", *cli_api)
    pending = launched.output.split("Job ", 1)[1].split()[0]

    everything = _run("queue", *cli_api)
    succeeded = _run("queue", "--state", "succeeded", *cli_api)
    named = _run("queue", "--name", "BETA", *cli_api)
    limited = _run("queue", "--limit", "1", *cli_api)
    recent = _run("queue", "--since", "1h", *cli_api)
    future = _run("queue", "--since", "2999-01-01", *cli_api)
    bad_state = _run("queue", "--state", "sleeping", *cli_api)
    bad_since = _run("queue", "--since", "last tuesday", *cli_api)

    assert everything.exit_code == 0, everything.output
    row = next(r for r in everything.output.splitlines() if done in r)
    assert "$0.1360" in row and "cli" in row  # 1 h at $0.136, submitted through the API
    assert done in succeeded.output and pending not in succeeded.output
    assert pending in named.output and done not in named.output
    assert "1 job(s)" in limited.output and pending in limited.output  # newest first
    assert "2 job(s)" in recent.output and "0 job(s)" in future.output
    assert bad_state.exit_code == 2 and "state" in bad_state.output and "sleeping" in bad_state.output
    assert bad_since.exit_code == 2 and "since" in bad_since.output


def test_an_attempt_of_a_few_milliseconds_is_rolled_up_on_the_local_endpoint(stack: Settings) -> None:
    """A tiny float is written as 5e-07 by default; moto's ADD could not add that, and refused the teardown.
    Counts are kept to the micro-dollar (and 3.6 ms): less rounds to nothing."""
    model = rollup_model(stack)
    tiny = CostPiece(
        day="2026-11-20", owner="u-a", cloud="aws", cost=5e-06, on_demand_cost=1.2e-05, hours=2e-09
    )
    for _ in range(3):  # the second ADD adds to what the first stored
        with TransactWrite(connection=model._get_connection().connection) as tx:
            add_pieces(tx, model, [tiny])

    pieces = read_pieces(stack, "2026-11-20", "2026-11-20", "u-a")[0]

    assert [(p.cost, p.on_demand_cost, p.hours) for p in pieces] == [
        pytest.approx((1.5e-05, 3.6e-05, 0.0), abs=1e-12)
    ]
