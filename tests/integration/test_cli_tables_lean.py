"""`skyless status` and `skyless queue`, run as a user types them against the real API over HTTP, print
their tables from the API's JSON: no httpx, no API model, no local runtime loaded (and, with no flag typed,
no pydantic at all), and every row the API holds is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
sys.argv = ["skyless", *json.loads(sys.argv[1])]
from cli.main import app
try:
    app()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\nPROBE" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
LEAN = ("httpx", "moto", "boto3", "botocore", "local_runtime", "shared.api")


def _as_typed(args: list[str], url: str, key: str) -> tuple[int, str, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYLESS_")}
    env.update(COLUMNS="200", SKYLESS_API_URL=url, SKYLESS_API_KEY=key)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    text, _, probe = out.stdout.rpartition("\nPROBE")
    assert probe, out.stderr
    result = json.loads(probe)
    return result["code"], text, set(result["modules"])


def _loaded(modules: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules if name in roots or name.startswith(tuple(f"{r}." for r in roots)))


def test_status_and_queue_print_every_job_from_the_json_without_models(
    tmp_path: Path, cli_api: list[str]
) -> None:
    task = tmp_path / "task.yaml"
    task.write_text("name: lean-table\nresources:\n  cpus: 1+\nrun: echo hi\n")
    launched = CliRunner().invoke(app, ["launch", str(task), "--detach", *cli_api], env={"COLUMNS": "200"})
    assert launched.exit_code == 0, launched.output
    job_id = next(word for word in launched.output.split() if word.startswith("job-"))
    url, key = cli_api[1], cli_api[3]

    for verb in (["status"], ["queue"], ["queue", "--limit", "5", "--name", "lean"]):
        code, text, modules = _as_typed(verb, url, key)

        assert code == 0, text
        assert job_id in text and "lean-table" in text and "1 job(s)" in text
        assert _loaded(modules, LEAN) == []
        if "--limit" not in verb:  # a value typed on the line is checked by typer's pydantic adapter
            assert _loaded(modules, ("pydantic",)) == []

    code, text, _ = _as_typed(["queue", "--json"], url, key)
    jobs = json.loads(text)
    assert [job["job_id"] for job in jobs] == [job_id]
    assert jobs[0]["name"] == "lean-table" and "cost" in jobs[0]
