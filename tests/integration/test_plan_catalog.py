"""POST /plan plans on the same catalog as the optimize function: refreshed prices in the bucket count."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from chalice.test import Client

from functions.submit.app import app
from shared.catalog.offering import Offering
from shared.config import Settings
from shared.price_refresh.versioned_catalog import write_version
from shared.store.users import create_user
from shared.wiring import wiring_for

TASK = "name: p\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo\n"


def test_plan_uses_the_refreshed_catalog_in_the_bucket(stack: Settings) -> None:
    refreshed = Offering(
        cloud="aws",
        region="us-east-1",
        zone="us-east-1a",
        instance_type="m6i.large",  # a family SkyPilot gives a CPU task
        accelerator=None,
        accelerator_count=0,
        accelerator_memory_gib=None,
        vcpus=2,
        memory_gib=8,
        price=0.0123,
        spot_price=None,
    )
    write_version(wiring_for(stack).objects, {"aws": [refreshed]}, {}, datetime.now(UTC))
    headers = {"Authorization": f"Bearer {create_user('planner', stack)}", "Content-Type": "application/json"}

    with Client(app) as client:
        answer = client.http.post("/plan", headers=headers, body=json.dumps({"task": TASK}))

    assert answer.status_code == 200, answer.json_body
    candidates = answer.json_body["tasks"][0]["candidates"]
    assert [(c["instance_type"], c["hourly_price"]) for c in candidates] == [("m6i.large", 0.0123)]
