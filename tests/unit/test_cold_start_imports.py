"""What a cold start imports: with the template's PYDANTIC_DISABLE_PLUGINS, pydantic's plugin lookup does
not import importlib.metadata, and models still validate; without it, pydantic's own loader runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import functions.optimize.handler
from shared.task.loader import load_pipeline
task = load_pipeline("resources:\\n  cpus: 2+\\nrun: echo hi\\n", filename="t.yaml").tasks[0]
loader = sys.modules["pydantic.plugin._loader"]
print(json.dumps({"stand_in": loader.get_plugins.__module__ == "shared.pydantic_plugins", "run": task.run}))
"""


@pytest.mark.parametrize(("disabled", "stand_in"), [("__all__", True), (None, False)])
def test_the_plugin_lookup_stands_in_only_when_plugins_are_off(disabled: str | None, stand_in: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if disabled:
        env["PYDANTIC_DISABLE_PLUGINS"] = disabled
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True)

    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"stand_in": stand_in, "run": "echo hi"}


def test_a_jobs_launch_path_does_not_import_the_named_clusters_path() -> None:
    """The provision handler imports the named clusters' path only for a cluster's message."""
    probe = (
        "import json, sys\nimport functions.provision.handler\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('shared.clusters.provisioning', "
        "'shared.clusters.start_stop', 'shared.clusters.steps')))\n"
        "print(json.dumps({'loaded': loaded, 'missing': []}))\n"
    )
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)

    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"loaded": [], "missing": []}


def template_handlers() -> list[str]:
    template = (ROOT / "infra" / "template.yaml").read_text()
    return sorted(set(re.findall(r"^\s+Handler: (\S+)$", template, re.MULTILINE)))


# The API validates its bodies with pydantic models and the catalog refresh is hourly: every other handler
# reads only our own rows and messages, so none of them builds a pydantic schema before its first call.
WITH_PYDANTIC = {"functions.submit.app.handler", "functions.catalog_refresh.handler.handler"}


@pytest.mark.parametrize("handler", [h for h in template_handlers() if h not in WITH_PYDANTIC])
def test_a_handler_imports_no_pydantic_before_its_first_call(handler: str) -> None:
    module, attribute = handler.rsplit(".", 1)
    probe = (
        f"import json, sys\nfrom {module} import {attribute}\n"
        "print(json.dumps(sorted(set(sys.modules) & {'pydantic.main', 'pydantic_core'})))\n"
    )
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)

    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("handler", template_handlers())
def test_no_handler_imports_boto3_before_its_first_call(handler: str) -> None:
    """Clients are botocore's and stream images are read by shared.aws.stream_images: boto3 (s3transfer,
    multiprocessing) is ~30 ms of CPU only the AWS provider's and the buckets' first calls pay."""
    module, attribute = handler.rsplit(".", 1)
    probe = f"import sys\nfrom {module} import {attribute}\nprint('boto3' in sys.modules)\n"
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)

    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_api_loads_jinja2_only_when_a_dashboard_page_renders() -> None:
    probe = (
        "import json, sys\nfrom functions.submit.app import handler\n"
        "before = 'jinja2' in sys.modules\n"
        "from functions.submit.dashboard.rendering import environment\n"
        "environment().from_string('{{ 1 }}').render()\n"
        "print(json.dumps([before, 'jinja2' in sys.modules]))\n"
    )
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)

    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [False, True]


TASK_MODELS = ("shared.task.spec", "shared.task.resources", "shared.task.strict_model", "shared.task.loader")
STORED_TASK = """
name: train
resources:
  cloud: aws
  cpus: 2+
  use_spot: true
  ports: 8080
  disk_size: 64
  job_recovery: {strategy: FAILOVER, max_restarts_on_errors: 2}
run: python train.py
"""


class _RefuseTaskModels:
    """A finder that fails any import of the task models: what a handler imports during a call shows."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name in TASK_MODELS:
            raise ImportError(f"{name} imported while a handler ran")


def test_optimize_provision_and_recovery_read_the_stored_task_without_its_models(
    stack: Any, queues: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submit (untrusted text) validates through the models; the steps after it never load them (bucket
    mounts need the registry's table, which the memory stack lacks: tests/unit/test_stored_task.py reads
    them both ways)."""
    from functions.optimize.handler import handler as optimize
    from functions.provision.handler import handler as provision
    from shared.jobs.recovery import recover_job
    from shared.jobs.submission import SubmitJob, submit_job
    from shared.wiring import wiring_for

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", json.dumps(sleeper))
    wiring = wiring_for(stack)
    job_id = submit_job(wiring, SubmitJob.from_text(owner="alice", task_text=STORED_TASK)).job_id
    for name in TASK_MODELS:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "meta_path", [_RefuseTaskModels(), *sys.meta_path])

    assert provision(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    job = wiring.store.get(job_id)
    assert job is not None and job.state == "SETTING_UP", job
    recover_job(wiring, job, "spot taken away", preempted=True)
    assert optimize(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    job = wiring.store.get(job_id)
    assert job is not None and job.state == "PLANNED" and int(job.attempt) == 1, job
    assert not set(TASK_MODELS) & set(sys.modules)
