"""One orphan killer: the reconcile sweep leaves VMs no record knows of to the reaper (grace period, a record
of each kill); it still ends the recorded clusters of finished jobs whose teardown was lost."""

from __future__ import annotations

import json
import sys

import pytest
from test_reaper import local_spec, running

from functions.reconcile.handler import handler as reconcile_handler
from local_runtime.dispatcher import SCHEDULED_HANDLERS
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.reaper import reap_orphans, reaper_records
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def test_reconcile_leaves_an_unrecorded_vm_to_the_reapers_grace_period(stack: Settings) -> None:
    orphan = local_spec("job-0000000recon")
    LocalCloud(stack.home, api_url=stack.api_url).launch(orphan)
    answer = reconcile_handler({"detail-type": "Scheduled Event", "source": "aws.events"}, None)
    assert answer["actions"] == {}
    assert orphan.cluster_id in running(stack)  # killed at once before: no grace, no record
    wiring = wiring_for(stack)
    assert reap_orphans(wiring, now=1000.0, grace_seconds=300).in_grace == [orphan.cluster_id]
    assert reap_orphans(wiring, now=1300.0, grace_seconds=300).killed == [orphan.cluster_id]
    [record] = reaper_records(stack)
    assert record["cluster"] == orphan.cluster_id


def test_the_local_runtime_runs_the_reaper_on_the_templates_schedule() -> None:
    module, every = SCHEDULED_HANDLERS["reaper"]
    assert module == "functions.reaper.handler" and every == 300.0  # template: rate(5 minutes)
    assert "catalog_refresh" not in SCHEDULED_HANDLERS  # needs the clouds' pricing APIs; local has no network
