"""Every example task file loads, and together they use every field the parser knows."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.task.loader import load_pipeline_file
from shared.task.resources import Resources
from shared.task.spec import Pipeline, Task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
OVERRIDES = {"envs_secrets.yaml": ({"DATASET": "s3://data"}, {"WANDB_API_KEY": "key"})}


def load_example(path: Path) -> Pipeline:
    envs, secrets = OVERRIDES.get(path.name, (None, None))
    return load_pipeline_file(path, env_overrides=envs, secret_overrides=secrets)


def test_there_are_at_least_twenty_examples() -> None:
    assert len(EXAMPLE_FILES) >= 20


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_loads_and_plans_at_least_one_request(path: Path) -> None:
    pipeline = load_example(path)
    for task in pipeline.tasks:
        assert task.resource_choice().requests
    assert Pipeline.model_validate(pipeline.model_dump(mode="json")) == pipeline


def test_hello_is_two_small_nodes_printing_rank_and_ips() -> None:
    (task,) = load_example(EXAMPLES / "hello.yaml").tasks
    (request,) = task.resource_choice().requests
    assert (
        task.num_nodes == 2 and request.accelerator is None and request.cpus is not None and request.cpus <= 2
    )
    assert 'echo "rank $SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES"; echo "$SKYPILOT_NODE_IPS"' in (
        task.run or ""
    )


def test_spot_example_is_a_recoverable_spot_cpu_job() -> None:
    (task,) = load_example(EXAMPLES / "spot.yaml").tasks
    (request,) = task.resource_choice().requests
    assert request.use_spot and request.accelerator is None
    assert task.resources.job_recovery is not None


def test_examples_include_a_chain_and_a_job_group() -> None:
    chain = load_example(EXAMPLES / "chain_train_eval_serve.yaml")
    assert chain.execution == "serial" and [t.name for t in chain.tasks] == ["train", "eval", "serve"]
    assert chain.tasks[0].outputs_gb > 0 and chain.tasks[1].inputs_gb > 0
    assert load_example(EXAMPLES / "job_group.yaml").execution == "parallel"


def _keys_used(value: object, into: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            into.add(str(key))
            if key not in ("envs", "secrets", "labels", "file_mounts", "service", "pool", "config", "inputs"):
                _keys_used(item, into)
    elif isinstance(value, list):
        for item in value:
            _keys_used(item, into)


def test_examples_together_cover_every_public_task_and_resources_field() -> None:
    used: set[str] = set()
    for path in EXAMPLE_FILES:
        for document in yaml.safe_load_all(path.read_text()):
            _keys_used(document, used)
    internal = {"file_mounts_mapping", "volume_mounts", "_metadata", "secrets"}
    task_fields = set(Task.known_fields()) - internal | {"secrets"}
    resource_fields = {f for f in Resources.known_fields() if not f.startswith("_")} - {"local_disk"}
    assert task_fields - used == set()
    assert resource_fields - used == set()
