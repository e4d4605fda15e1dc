"""A job's plan and blocklist as its row keeps them: what the pydantic models wrote before (numbers as JSON
gave them, keys a later version added) reads back as the same plan, and a plan survives its own round trip."""

from __future__ import annotations

import json

from shared.jobs.blocks import blocks_json
from shared.optimizer.plan import Block, Candidate, Plan, TaskPlan

WRITTEN_BEFORE = (
    '{"objective":"cost","tasks":[{"task_name":"train","num_nodes":2,"candidates":[{"cloud":"aws",'
    '"region":"us-east-1","zone":"us-east-1a","instance_type":"p3.2xlarge","accelerator":"V100",'
    '"accelerator_count":1,"vcpus":8,"memory_gib":61.0,"use_spot":true,"hourly_price":0.918,"num_nodes":2,'
    '"estimated_hours":1,"estimated_cost":1.836,"list_price":null,"reservation":null,"reservation_kind":null,'
    '"added_later":"ignored"}]}],"egress_cost":0.0,"total_cost":1.836,"notes":["zone cooling"]}'
)
CANDIDATE = Candidate(
    cloud="aws",
    region="us-east-1",
    zone="us-east-1a",
    instance_type="p3.2xlarge",
    accelerator="V100",
    accelerator_count=1.0,
    vcpus=8.0,
    memory_gib=61.0,
    use_spot=True,
    hourly_price=0.918,
    num_nodes=2,
    estimated_hours=1.0,
    estimated_cost=1.836,
)


def test_a_plan_the_pydantic_models_wrote_reads_back_the_same() -> None:
    plan = Plan.from_json(WRITTEN_BEFORE.encode())

    expected = TaskPlan(task_name="train", num_nodes=2, candidates=[CANDIDATE])
    assert plan == Plan(objective="cost", tasks=[expected], total_cost=1.836, notes=["zone cooling"])
    chosen = plan.tasks[0].chosen
    assert isinstance(chosen.vcpus, float) and chosen.place == "aws/us-east-1/us-east-1a"
    assert Plan.from_json(plan.to_json()) == plan
    stored = json.loads(WRITTEN_BEFORE)
    del stored["tasks"][0]["candidates"][0]["added_later"]
    assert json.loads(plan.to_json()) == stored


def test_a_blocklist_row_keeps_only_what_differs_from_the_defaults() -> None:
    blocks = [Block(cloud="aws", region="us-east-1", reason="no capacity"), Block(cloud="gcp")]

    row = '[{"cloud":"aws","region":"us-east-1","reason":"no capacity"},{"cloud":"gcp"}]'
    assert blocks_json(blocks) == row
    assert [Block.from_dict(b) for b in json.loads(blocks_json(blocks))] == blocks
