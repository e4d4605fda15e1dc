"""`skyless plan` as a user reads it, driven through typer's CliRunner on task files of this project:
the market of every row, why the chosen row won, why a cloud has no row, errors at the line of the field
they come from, the file size limit, sky launch's resource overrides, --env-file, and secrets left for
launch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from shared.task.limits import MAX_TASK_FILE_BYTES

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"


@pytest.fixture(autouse=True)
def builtin_catalog_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path / "home"))
    from shared.catalog.model import reset_default_catalog

    reset_default_catalog()
    yield
    reset_default_catalog()


def plan(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", *args], env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def plan_json(*args: str) -> tuple[int, dict]:
    code, out, _ = plan(*args, "--json")
    return code, json.loads(out)


def test_spot_rows_say_spot_and_a_cloud_without_a_spot_market_says_why_it_is_missing() -> None:
    code, out, _ = plan(str(FILES / "a100_spot.yaml"))
    assert code == 0
    assert "MARKET" in out and "│ spot " in out and "│ on-demand" not in out
    assert "lambda: no candidate: A100:8 spot in lambda: no spot market for it there (on-demand only)" in out
    assert "Why spot-a100:" in out and "cheapest of" in out and "spot offerings" in out


def test_a_cpu_step_placed_for_egress_says_what_the_cheaper_place_would_have_cost() -> None:
    code, body = plan_json(str(FILES / "cpu_between_lambda_tasks.yaml"))
    assert code == 0
    why = body["why"][1]
    assert why.startswith("preprocess: ")
    # 2000 GB in from Lambda (free to leave Lambda) and 2000 GB out to it ($0.09/GB to leave AWS)
    assert "is cheaper per hour, but the 4000 GB this task moves would cost $180.00 in egress there" in why


def test_an_ordered_fallback_says_which_alternative_won_and_that_the_first_had_nothing() -> None:
    code, body = plan_json(str(FILES / "ordered_fallback.yaml"))
    assert code == 0
    assert body["tasks"][0]["chosen"]["cloud"] == "aws"
    assert (
        "alternative 2 is the first in the order written that fits; alternative 1 has no offering"
        in (body["why"][0])
    )


@pytest.mark.parametrize(
    ("name", "line", "field", "words"),
    [
        ("too_cheap.yaml", 4, "resources.max_hourly_cost", "above max_hourly_cost $5/h"),
        ("unknown_gpu_any_of.yaml", 5, "resources.any_of[0].gpus", "no accelerator H10O in the catalog"),
        ("h100_two_nodes_runpod.yaml", 2, "num_nodes", "runs no multi-node clusters"),
        ("tpu_v4_8.yaml", None, "--clouds", "offered only on gcp, not enabled (enabled: aws)"),
    ],
)
def test_optimizer_errors_name_the_file_line_and_field_they_come_from(
    name: str, line: int | None, field: str, words: str
) -> None:
    path = FILES / name
    code, error = plan_json(str(path), *(["--clouds", "aws"] if field == "--clouds" else []))
    assert code == 2 and error["error"] == "NoOfferingError"
    assert (error["file"], error["line"], error["field"]) == (str(path), line, field)
    assert words in error["message"]


def test_a_task_file_over_the_limit_is_refused_by_plan_naming_the_file_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("name: big\nrun: |\n" + "  echo 0123456789abcdef\n" * (MAX_TASK_FILE_BYTES // 20))
    code, error = plan_json(str(path))
    assert code == 2
    assert (
        error["file"] == str(path)
        and "256 KiB" in error["message"]
        and "the task file is" in error["message"]
    )


def test_gpus_and_num_nodes_override_the_file_as_sky_launch_does() -> None:
    code, body = plan_json(str(FILES / "cpu_4_no_memory.yaml"), "--gpus", "H100:8", "--num-nodes", "2")
    assert code == 0
    (task,) = body["tasks"]
    assert task["num_nodes"] == 2 and task["chosen"]["accelerators"] == {"H100": 8}
    assert "runpod" not in {c["cloud"] for c in task["candidates"]}


def test_infra_and_use_spot_overrides_pin_the_place_and_the_market() -> None:
    code, body = plan_json(str(FILES / "t4_no_cpus.yaml"), "--infra", "aws/us-west-2", "--use-spot")
    assert code == 0
    chosen = body["tasks"][0]["chosen"]
    assert (chosen["cloud"], chosen["region"], chosen["spot"]) == ("aws", "us-west-2", True)


def test_an_override_nothing_fits_is_blamed_on_the_option_and_a_bad_one_is_refused() -> None:
    code, error = plan_json(str(FILES / "cpu_4_no_memory.yaml"), "--gpus", "H100:3")
    assert code == 2 and error["field"] == "--gpus" and error["line"] is None
    code, error = plan_json(str(FILES / "cpu_4_no_memory.yaml"), "--gpus", "H100:eight")
    assert code == 2 and error["field"] == "--gpus"
    code, error = plan_json(str(FILES / "cpu_4_no_memory.yaml"), "--infra", "aws", "--region", "us-east-1")
    assert code == 2 and error["field"] == "--infra"


def test_overrides_on_a_file_of_several_tasks_are_ignored_with_a_note_as_sky_launch_does() -> None:
    code, body = plan_json(str(FILES / "two_tasks.yaml"), "--gpus", "H100:8")
    assert code == 0
    assert all(t["chosen"]["accelerators"] is None for t in body["tasks"])
    assert any("resource overrides ignored" in note for note in body["notes"])


def test_env_file_gives_values_and_env_wins_over_it() -> None:
    code, _, err = plan(str(FILES / "greeting.yaml"))
    assert code == 2 and "GREETING" in err
    code, _ = plan_json(str(FILES / "greeting.yaml"), "--env-file", str(FILES / "greeting.env"))
    assert code == 0
    from cli.task_options import env_values

    values = env_values(["TARGET=you"], FILES / "greeting.env")
    assert values == {"GREETING": "hello", "TARGET": "you"}


def test_null_secrets_plan_and_the_plan_says_launch_will_need_them() -> None:
    code, out, _ = plan(str(FILES / "null_secret.yaml"))
    assert code == 0
    assert "secrets HF_TOKEN, WANDB_API_KEY have no value" in out
    assert "--secret HF_TOKEN=... --secret WANDB_API_KEY=..." in out
    code, body = plan_json(str(FILES / "null_secret.yaml"), "--secret", "HF_TOKEN=x")
    assert body["secrets_needed"] == [{"task": "needs-a-token", "secrets": ["WANDB_API_KEY"]}]


def test_fields_read_but_not_acted_on_are_said_once_each() -> None:
    code, out, _ = plan(str(FILES / "every_ignored_field.yaml"))
    assert code == 0
    for field in ("event_callback", "resources.autostop", "resources.disk_tier", "volumes", "config"):
        assert out.count(f"ignored-fields: {field}: read,") == 1, field


def test_a_plan_made_with_a_blocklist_says_which_cheaper_place_is_blocked_and_why() -> None:
    from shared.catalog.model import BuiltinSource, build_catalog
    from shared.optimizer import plan_pipeline
    from shared.optimizer.plan import Block
    from shared.optimizer.reasons import why_chosen
    from shared.task.loader import load_pipeline_file

    catalog = build_catalog([BuiltinSource()])
    pipeline = load_pipeline_file(FILES / "h100_two_nodes.yaml")
    free = plan_pipeline(pipeline, catalog).tasks[0].chosen
    blocks = [Block(cloud=free.cloud, reason="no capacity: sold out")]
    blocked = plan_pipeline(pipeline, catalog, blocklist=blocks)

    [why] = why_chosen(pipeline, blocked, catalog, blocklist=blocks)
    assert blocked.tasks[0].chosen.cloud != free.cloud
    assert f"cheaper {free.cloud} {free.instance_type}" in why and "is blocked (no capacity: sold out)" in why
