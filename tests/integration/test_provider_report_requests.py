"""`skyless report providers` on DynamoDB (moto's server) over a few hundred finished jobs: each job's
timeline is one Query, its first event and launches taken from the job and cluster records the report has
already read. `timeline()` reads them again (a GetItem and a BatchGetItem a job): the report built that way,
as it was, prints the same. Requests are counted through botocore's `before-call` events."""

from __future__ import annotations

import json
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.hooks import HierarchicalEmitter
from history import seed_dynamo
from test_provider_scorecard import _run, _seed

from shared.config import Settings
from shared.reports import provider_reads
from shared.store.jobs import DynamoJobStore
from shared.store.models import ClusterModel, JobModel
from shared.store.users import find_user

JOBS = 300


def _report(cli_api: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Counter[str]]:
    """The report's JSON as the CLI prints it, and the DynamoDB requests serving it, by operation."""
    calls: Counter[str] = Counter()
    emit = HierarchicalEmitter._emit

    def counted(emitter: HierarchicalEmitter, event_name: str, *args: Any, **kwargs: Any) -> Any:
        if event_name.startswith("before-call.dynamodb."):
            calls[event_name.rsplit(".", 1)[1]] += 1
        return emit(emitter, event_name, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(HierarchicalEmitter, "_emit", counted)
        answer = _run("report", "providers", "--json", *cli_api)
    assert answer.exit_code == 0, answer.output
    return json.loads(answer.output), calls


def test_each_jobs_timeline_is_one_query_and_the_report_is_unchanged(
    stack: Settings, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = find_user(cli_api[3], stack)
    assert owner is not None
    now_is = time.time()  # both reports as of one moment: a cluster still UP adds hours as time goes on
    monkeypatch.setattr(provider_reads, "time", SimpleNamespace(time=lambda: now_is))
    seed_dynamo(stack, JOBS, owner=owner.user_id, prefix="job-hist")  # finished, ids as submitted jobs'
    _seed(stack, owner.user_id)  # refused, launched twice, preempted, failed: its kept events count
    _seed(stack, owner.user_id)

    now, requests = _report(cli_api, monkeypatch)

    job_timeline = DynamoJobStore.job_timeline

    def as_before(store: DynamoJobStore, job: JobModel, clusters: Any) -> list[Any]:
        """As `timeline(job_id)` reads it: the job and its clusters again."""
        again = store.get(job.job_id)
        assert again is not None
        ids = [f"{job.job_id}-{n}" for n in range(int(again.attempt) + 1)]
        return job_timeline(store, again, store.clusters_by_id(ids).values())

    monkeypatch.setattr(DynamoJobStore, "job_timeline", as_before)
    before, requests_before = _report(cli_api, monkeypatch)

    jobs = JOBS + 2
    assert now == before and now["jobs_read"] == jobs
    gcp = next(line for line in now["lines"] if line["cloud"] == "gcp")
    assert (gcp["launches"], gcp["preemptions"]) == (2, 2)  # the launches kept in the cluster records
    assert requests["Query"] == requests_before["Query"]  # a timeline a job, the refusals of the 2 refused
    assert (requests_before["GetItem"] - requests["GetItem"], requests["BatchGetItem"]) == (jobs, 4)
    assert requests_before["BatchGetItem"] == 4 + jobs  # its clusters, once more for each job
    assert sum(requests.values()) == sum(requests_before.values()) - 2 * jobs
    print(f"\n{jobs} jobs: {sum(requests_before.values())} DynamoDB requests -> {sum(requests.values())}")
    print(f"  before: {dict(requests_before)}\n  now:    {dict(requests)}")


def test_a_job_timeline_from_the_records_is_the_stored_timeline(stack: Settings) -> None:
    from shared.wiring import wiring_for

    job_id = _seed(stack, "u-one")
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert isinstance(store, DynamoJobStore) and job is not None
    clusters: list[ClusterModel] = list(store.clusters_by_id([f"{job_id}-0", f"{job_id}-1"]).values())

    kept = store.job_timeline(job, clusters)

    assert [e.serialize() for e in kept] == [e.serialize() for e in store.timeline(job_id)]
    assert {e.message for e in kept} >= {"launched"}  # the launches, kept in the cluster records
    assert len(store.job_timeline(job, [])) == len(kept) - 2  # without the clusters, without their launches
