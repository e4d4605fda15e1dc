"""The chaos run, small enough for CI: jobs through the real core operations with every message delivered
at least twice (shuffled, late), crashes before and after store/queue/cloud calls, capacity outages,
transient errors, zone-wide preemption storms and single nodes of two-node clusters taken away. Every
invariant must hold; `benchmarks/chaos.py` runs the same at 1,000 jobs.

DynamoDB is moto in this process (mock_aws): the same store code, without HTTP between it and the run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos.run import ChaosConfig, run_chaos
from moto import mock_aws

from shared.config import Settings
from shared.store.models import models_for

STORMY = {"preemptions_per_hour": 400.0, "storms_per_hour": 20.0, "crash_rate": 0.06, "work": 4}


@pytest.fixture
def chaos_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    fake = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in {**fake, "SKYLESS_AGENT_SECRET": "chaos"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        settings = Settings(prefix=f"chaos{uuid.uuid4().hex[:8]}", home=tmp_path, providers="*=sim")
        for model in models_for(settings).all():
            model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        yield settings


def test_chaos_every_invariant_holds(chaos_settings: Settings) -> None:
    report = run_chaos(chaos_settings, ChaosConfig(jobs=20, seed=11, **STORMY))
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
