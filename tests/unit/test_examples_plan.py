"""Every task file in examples/ plans against the built-in catalog, through the API and through the CLI.

A file that cannot plan with the built-in catalog is listed in NOT_PLANNABLE with the reason the
error must give; when the catalog grows to cover it, the test fails and the entry goes.
The real SkyPilot files in tests/fixtures/skypilot/accepted either plan or fail with NoOfferingError.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from shared.catalog.model import load_default_catalog
from shared.errors import NoOfferingError, TaskFileError
from shared.optimizer import plan_pipeline, plan_task
from shared.task.loader import load_pipeline_file
from shared.task.spec import Pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.y*ml"))
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "skypilot" / "accepted").glob("*.y*ml"))

ENV = {"envs_secrets.yaml": {"DATASET": "s3://bucket/data"}}
SECRETS = {"envs_secrets.yaml": {"WANDB_API_KEY": "key"}}
NOT_PLANNABLE = {
    "kubernetes.yaml": "not offered on kubernetes",  # skyless runs no Kubernetes clusters
}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plans_with_every_chosen_candidate_feasible(path: Path) -> None:
    pipeline = load_pipeline_file(path, ENV.get(path.name), SECRETS.get(path.name))
    catalog = load_default_catalog()
    if path.name in NOT_PLANNABLE:
        with pytest.raises(NoOfferingError) as raised:
            plan_pipeline(pipeline, catalog)
        assert NOT_PLANNABLE[path.name] in raised.value.message
        return
    plan = plan_pipeline(pipeline, catalog)
    assert [t.task_name for t in plan.tasks] == [t.name for t in pipeline.tasks]
    cheapest_total = 0.0
    for task, task_plan in zip(pipeline.tasks, plan.tasks, strict=True):
        feasible = plan_task(task.resource_choice(), task.num_nodes, catalog, max_candidates=None)
        assert task_plan.chosen in feasible
        assert task_plan.chosen.num_nodes == task.num_nodes
        cheapest_total += feasible[0].estimated_cost
    assert plan.total_cost >= cheapest_total - 1e-9


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plan_json_from_the_cli(path: Path) -> None:
    args = ["plan", str(path), "--json"]
    for key, value in ENV.get(path.name, {}).items():
        args += ["--env", f"{key}={value}"]
    for key, value in SECRETS.get(path.name, {}).items():
        args += ["--secret", f"{key}={value}"]
    result = CliRunner().invoke(app, args)
    body = json.loads(result.stdout)
    if path.name in NOT_PLANNABLE:
        assert result.exit_code == 2 and body["error"] == "NoOfferingError"
        return
    assert result.exit_code == 0, result.stdout
    pipeline = load_pipeline_file(path, ENV.get(path.name), SECRETS.get(path.name))
    assert len(body["tasks"]) == len(pipeline.tasks)
    assert all(t["candidates"][0] == t["chosen"] for t in body["tasks"])


def _load_filling_missing_values(path: Path) -> Pipeline:
    """Load a file, giving each env/secret it says is missing a value (as a user would with --env)."""
    given: dict[str, dict[str, str]] = {"envs": {}, "secrets": {}}
    for _ in range(20):
        try:
            return load_pipeline_file(path, given["envs"], given["secrets"])
        except TaskFileError as error:
            section, _, name = (error.field or "").partition(".")
            if section not in given or not name or name in given[section]:
                raise
            given[section][name] = "value"
    raise AssertionError(f"{path} keeps asking for values")


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_real_skypilot_file_plans_or_says_why_not(path: Path) -> None:
    pipeline = _load_filling_missing_values(path)
    try:
        plan = plan_pipeline(pipeline, load_default_catalog())
    except NoOfferingError as error:
        assert error.message.startswith(("no offering fits", "task "))
        return
    assert len(plan.tasks) == len(pipeline.tasks) and plan.total_cost > 0
