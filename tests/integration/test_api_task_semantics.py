"""The HTTPS API reads task files as `plan` and `launch` do: a dry run needs no secret values, a
submission does (and keeps them out of the jobs table), and optimizer errors name the file's line."""

from __future__ import annotations

import json
from pathlib import Path

from chalice.test import Client

from functions.submit.app import app
from shared.config import Settings
from shared.jobs.task_records import secrets_of
from shared.store.users import create_user
from shared.wiring import wiring_for

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"


def post(client: Client, key: str, path: str, body: dict) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    answer = client.http.post(path, headers=headers, body=json.dumps(body))
    return answer.status_code, answer.json_body


def test_null_secrets_plan_without_values_but_a_job_needs_them(stack: Settings) -> None:
    key = create_user("secretive", stack)
    text = (FILES / "null_secret.yaml").read_text()
    with Client(app) as client:
        planned, plan = post(client, key, "/plan", {"task": text, "filename": "null_secret.yaml"})
        refused, error = post(client, key, "/jobs", {"task": text, "filename": "null_secret.yaml"})
        secrets = {"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "wb"}
        made, job = post(client, key, "/jobs", {"task": text, "secrets": secrets})

    assert planned == 200 and plan["tasks"][0]["candidates"]
    assert refused == 400 and (error["line"], error["field"]) == (3, "secrets.HF_TOKEN")
    assert made == 201
    wiring = wiring_for(stack)
    record = wiring.store.get(job["job_id"])
    assert record is not None and "hf_abc" not in json.dumps(record.attribute_values, default=str)
    assert secrets_of(wiring, record, 0) == secrets


def test_an_optimizer_error_names_the_line_of_its_field_in_the_task_sent(stack: Settings) -> None:
    key = create_user("thrifty", stack)
    with Client(app) as client:
        status, error = post(
            client, key, "/plan", {"task": (FILES / "too_cheap.yaml").read_text(), "filename": "t.yaml"}
        )
    assert status == 400
    assert (error["error"], error["file"], error["line"], error["field"]) == (
        "NoOfferingError", "t.yaml", 4, "resources.max_hourly_cost",
    )  # fmt: skip


def test_in_a_pipeline_the_error_line_is_in_the_task_it_comes_from(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app as cli

    path = tmp_path / "chain.yaml"
    path.write_text(
        "name: chain\n---\nname: ok\nresources:\n  cpus: 2+\nrun: echo\n---\n"
        "name: dear\nresources:\n  accelerators: H100:8\n  max_hourly_cost: 1\nrun: echo\n"
    )
    result = CliRunner().invoke(cli, ["plan", str(path), "--json"])
    error = json.loads(result.stdout)
    assert result.exit_code == 2
    assert (error["line"], error["field"]) == (11, "resources.max_hourly_cost")
    assert error["message"].startswith("task 'dear': ")
