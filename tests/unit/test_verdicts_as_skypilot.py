"""Verdicts as SkyPilot 0.14.1 gives them, for the behaviours `benchmarks/verdicts.py` found apart: job-group
header fields it ignores, the `service:` section it checks; and every real file of the corpus
(tests/fixtures/skypilot_corpus) reads and plans to one of the three verdicts, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.catalog import Catalog
from shared.errors import NoOfferingError, TaskFileError, UserError
from shared.optimizer import plan_pipeline
from shared.task import load_pipeline, pipeline_notes, read_task_file
from shared.task.loader import load_pipeline_file
from shared.task.spec import Pipeline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = FIXTURES / "semantics"
CORPUS = sorted((FIXTURES / "skypilot_corpus").glob("*.yaml"))
SHARED_CATALOG = Path(__file__).resolve().parents[3] / "shared" / "catalog" / "skypilot" / "v8"


def test_a_job_group_header_field_skypilot_ignores_is_read_and_said_ignored() -> None:
    pipeline = load_pipeline_file(FILES / "job_group_placement.yaml")
    assert [t.name for t in pipeline.tasks] == ["trainer", "buffer"] and pipeline.execution == "parallel"
    assert pipeline.ignored_header_fields == ["placement"]
    assert pipeline_notes(pipeline)[0].startswith("job group header: placement: read, ignored")
    # The job record keeps it, so `status` can say it too.
    stored = pipeline.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert Pipeline.model_validate(stored).ignored_header_fields == ["placement"]


def test_a_near_miss_of_a_job_group_header_field_is_still_a_typo() -> None:
    text = "name: g\nexecution: parallel\nprimary_task: [a]\n---\nname: a\nrun: echo a\n"
    with pytest.raises(TaskFileError) as caught:
        load_pipeline(text, filename="g.yaml")
    assert (caught.value.line, caught.value.field) == (3, "primary_task")


def test_an_unknown_service_field_is_refused_at_its_line_like_skypilots_service_schema() -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FILES / "service_unknown_field.yaml")
    error = caught.value
    assert (error.line, error.field) == (5, "service.replica_policy.init_replicas")
    assert error.hint == "Instead of 'init_replicas', did you mean 'min_replicas'?"


def test_target_qps_without_max_replicas_is_refused_as_skyserve_refuses_it() -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(FILES / "service_qps_without_max.yaml")
    error = caught.value
    assert (error.line, error.field) == (5, "service.replica_policy.target_qps_per_replica")
    assert "max_replicas must be set" in error.message


@pytest.mark.parametrize(
    ("service", "field", "words"),
    [
        ("replicas: 2\n  replica_policy: {min_replicas: 1}", "service.replicas", "not both"),
        ("readiness_probe: health", "service.readiness_probe", "must start with '/'"),
        ("ports: 70000", "service.ports", "1 to 65535"),
        ("load_balancing_policy: fastest", "service.load_balancing_policy", "round_robin"),
        (
            "replica_policy: {min_replicas: 1, max_replicas: 2}",
            "service.replica_policy.max_replicas",
            "differ",
        ),
        ("replica_policy: {max_replicas: 3}", "service.replica_policy", "missing required field"),
        ("tls: {keyfile: k.pem}", "service.tls", "missing required field 'certfile'"),
    ],
)
def test_each_service_check_names_its_field(service: str, field: str, words: str) -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline(f"service:\n  {service}\nrun: echo\n", filename="s.yaml")
    assert caught.value.field == field and words in caught.value.message


def test_a_full_service_section_loads_and_round_trips_through_the_job_record() -> None:
    pipeline = load_pipeline_file(FILES / "service_full.yaml")
    service = pipeline.tasks[0].service
    assert service is not None and service.replica_policy is not None
    assert service.replica_policy.target_qps_per_replica == 2.5
    stored = pipeline.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert stored["tasks"][0]["service"]["readiness_probe"]["post_data"] == {"model": "m"}
    assert Pipeline.model_validate(stored) == pipeline
    assert any(n.startswith("task #1: service: read, not run") for n in pipeline_notes(pipeline))


@pytest.fixture(scope="module")
def shared_catalog() -> Catalog:
    if not SHARED_CATALOG.is_dir():
        pytest.skip(f"{SHARED_CATALOG} is not here")
    from shared.catalog.skypilot_import import import_skypilot_catalog

    return Catalog(import_skypilot_catalog(SHARED_CATALOG))


def test_the_corpus_holds_at_least_120_real_files_each_in_the_manifest() -> None:
    listed = {
        line.split("\t")[0]
        for line in (FIXTURES / "skypilot_corpus" / "MANIFEST.tsv").read_text().splitlines()
        if line.strip()
    }
    assert len(CORPUS) >= 120 and {p.name for p in CORPUS} == listed


def test_every_corpus_file_plans_to_one_verdict_without_a_traceback(shared_catalog: Catalog) -> None:
    """What `skyless plan FILE --catalog ../shared/catalog/skypilot/v8` does, minus the printing."""
    verdicts: dict[str, int] = {"planned": 0, "infeasible": 0, "rejected": 0}
    for path in CORPUS:
        try:
            pipeline = load_pipeline(read_task_file(path), filename=str(path), defer_secrets=True)
            plan_pipeline(pipeline, shared_catalog, enabled_clouds=set(shared_catalog.clouds()))
        except NoOfferingError as error:
            assert error.message, path
            verdicts["infeasible"] += 1
        except UserError as error:
            assert error.file == str(path) and error.message, path
            verdicts["rejected"] += 1
        else:
            verdicts["planned"] += 1
    assert sum(verdicts.values()) == len(CORPUS)
    assert all(verdicts.values()), verdicts  # the corpus exercises all three verdicts


def _plan(*args: str, home: Path) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(app, ["plan", *args], env={"COLUMNS": "200", "SKYLESS_HOME": str(home)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_skyless_plan_says_the_ignored_job_group_field_and_plans(tmp_path: Path) -> None:
    code, out, _ = _plan(str(FILES / "job_group_placement.yaml"), "--json", home=tmp_path)
    body = json.loads(out)
    assert code == 0 and len(body["tasks"]) == 2
    assert any(n.startswith("job group header: placement: read, ignored") for n in body["notes"])


def test_skyless_plan_refuses_a_bad_service_with_file_line_and_field(tmp_path: Path) -> None:
    code, out, _ = _plan(str(FILES / "service_unknown_field.yaml"), "--json", home=tmp_path)
    body = json.loads(out)
    assert code == 2 and body["line"] == 5 and body["field"] == "service.replica_policy.init_replicas"
    assert (
        body["file"].endswith("service_unknown_field.yaml") and "did you mean 'min_replicas'" in body["hint"]
    )
