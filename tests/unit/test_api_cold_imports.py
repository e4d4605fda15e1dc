"""What a cold API start imports: each route's views (and the task models, the optimizer, the named
clusters' path) on the route's first request, not at import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ON_USE = (
    "functions.submit.job_views",
    "functions.submit.cluster_views",
    "functions.submit.cost_views",
    "shared.task.spec",
    "shared.optimizer.single_task",
    "shared.jobs.submission",
    "shared.clusters.agents",
    "shared.jobs.contract_admin",
    "croniter",
)


def loaded_after(statements: str) -> list[str]:
    found = f"print(json.dumps(sorted(m for m in {ON_USE!r} if m in sys.modules)))"
    probe = f"import json, sys\n{statements}\n{found}"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout.splitlines()[-1]))


def test_importing_the_api_imports_no_routes_views_and_no_task_model() -> None:
    assert loaded_after("import functions.submit.app") == []


def test_a_routes_views_are_imported_by_its_first_request() -> None:
    route = (
        "import functions.submit.app as api\n"
        "from chalice.test import Client\n"
        "with Client(api.app) as client:\n"
        "    assert client.http.post('/plan', body=b'{}').status_code == 401\n"  # the view is never reached
        "    assert client.http.get('/openapi.json').status_code == 200\n"
    )
    assert loaded_after(route) == []  # an unauthenticated request and the description need no view
    views = (
        "import functions.submit.app as api\nimport functions.submit.cluster_routes as clusters\n"
        "api.job_views.read_task\nclusters.cluster_views.agent_source\n"
    )
    assert {"functions.submit.job_views", "functions.submit.cluster_views"} <= set(loaded_after(views))
