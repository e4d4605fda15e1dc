"""Property tests: generated resources load, expand into requests, round-trip; errors point home."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.catalog.accelerators import canonical_name
from shared.errors import TaskFileError
from shared.task.loader import load_pipeline
from shared.task.spec import Pipeline
from shared.task.values import CLOUDS, parse_infra

GPUS = ["A100", "H100", "V100", "T4", "L4", "A10G"]

clouds = st.sampled_from(CLOUDS).flatmap(lambda c: st.sampled_from([c, c.upper(), c.capitalize()]))
counts = st.sampled_from([1, 2, 4, 8])
accelerators = st.one_of(
    st.tuples(st.sampled_from(GPUS), counts).map(lambda p: f"{p[0]}:{p[1]}"),
    st.dictionaries(st.sampled_from(GPUS), st.one_of(st.none(), counts), min_size=1, max_size=3),
    st.lists(st.tuples(st.sampled_from(GPUS), counts), min_size=1, max_size=3, unique_by=lambda p: p[0]).map(
        lambda items: [f"{n}:{c}" for n, c in items]
    ),
)
cpus = st.one_of(st.integers(1, 96), st.integers(1, 96).map(lambda n: f"{n}+"), st.integers(1, 96).map(str))
memory = st.one_of(
    st.integers(1, 512), st.integers(1, 512).map(lambda n: f"{n}+"), st.integers(1, 8).map(lambda n: f"{n}x")
)
single_resources = st.fixed_dictionaries(
    {},
    optional={
        "cloud": clouds,
        "region": st.sampled_from(["us-east-1", "us-central1", "eastus"]),
        "accelerators": accelerators,
        "cpus": cpus,
        "memory": memory,
        "use_spot": st.booleans(),
        "disk_size": st.integers(10, 2000),
        "ports": st.one_of(st.integers(1, 65535), st.lists(st.integers(1, 65535), max_size=3)),
        "labels": st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text("abc", max_size=5)),
        "priority": st.integers(-1000, 1000),
        "max_hourly_cost": st.floats(0.01, 100),
        "job_recovery": st.sampled_from(["FAILOVER", "eager_next_region"]),
    },
)
alternatives = st.lists(
    st.fixed_dictionaries(
        {}, optional={"infra": st.sampled_from(["aws", "gcp/us-central1", "azure/eastus"])}
    ),
    min_size=1,
    max_size=3,
)
resources = st.tuples(single_resources, st.none() | alternatives, st.booleans()).map(
    lambda t: {**t[0], **({"ordered" if t[2] else "any_of": t[1]} if t[1] else {})}
)


def number_of(value: Any) -> float | None:
    return None if value is None else float(str(value).rstrip("+x"))


@settings(max_examples=80, deadline=None)
@given(resources=resources, num_nodes=st.integers(1, 16))
def test_generated_resources_load_and_expand_into_one_request_per_alternative(
    resources: dict[str, Any], num_nodes: int
) -> None:
    text = yaml.safe_dump({"name": "t", "num_nodes": num_nodes, "resources": resources, "run": "echo"})
    (task,) = load_pipeline(text).tasks
    choice = task.resource_choice()
    alts = resources.get("any_of") or resources.get("ordered") or [{}]
    accs = resources.get("accelerators")
    if isinstance(accs, str):
        names = [accs.split(":")[0]]
    elif isinstance(accs, dict):
        names = list(accs)
    elif isinstance(accs, list):
        names = [a.split(":")[0] for a in accs]
    else:
        names = [None]
    base_location = (
        resources["cloud"].lower() if "cloud" in resources else None,
        resources.get("region"),
    )
    expected = {
        (*(parse_infra(a["infra"])[:2] if "infra" in a else base_location), canonical_name(n) if n else None)
        for a in alts
        for n in names
    }
    assert {(r.cloud, r.region, r.accelerator) for r in choice.requests} == expected
    assert len(choice.requests) == len(expected)
    # `ordered:` is ordered, and so is an accelerator list (SkyPilot tries it in order) outside any_of
    listed = isinstance(accs, list) and "any_of" not in resources
    assert choice.ordered == ("ordered" in resources or listed)
    for request in choice.requests:
        assert request.cpus == number_of(resources.get("cpus"))
        assert request.cpus_at_least == (str(resources.get("cpus", "+")).endswith("+"))
        assert request.use_spot == bool(resources.get("use_spot"))
        mem = resources.get("memory")
        if isinstance(mem, str) and mem.endswith("x"):
            assert (request.memory_gib, request.memory_per_vcpu) == (None, float(mem[:-1]))
        else:
            assert request.memory_gib == number_of(mem)
    pipeline = load_pipeline(text)
    assert Pipeline.model_validate(pipeline.model_dump(mode="json")) == pipeline
    assert Pipeline.model_validate_json(pipeline.model_dump_json()) == pipeline


task_dicts = st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), "resources": single_resources},
    optional={
        "num_nodes": st.integers(1, 8),
        "setup": st.text("abc \n", max_size=30),
        "run": st.text("abc \n", max_size=30),
        "envs": st.dictionaries(
            st.from_regex(r"[A-Z_][A-Z0-9_]{0,6}", fullmatch=True), st.text("xyz", max_size=4)
        ),
    },
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task=task_dicts, where=st.sampled_from(["top", "resources"]), position=st.integers(0, 20))
def test_unknown_field_error_points_at_the_line_where_it_was_written(
    task: dict[str, Any], where: str, position: int
) -> None:
    target = task if where == "top" else task["resources"]
    items = list(target.items())
    items.insert(position % (len(items) + 1), ("zz_unknown_field", 1))
    target.clear()
    target.update(items)
    text = yaml.safe_dump(task, sort_keys=False, default_style=None)
    expected_line = next(i for i, line in enumerate(text.splitlines(), 1) if "zz_unknown_field" in line)
    try:
        load_pipeline(text, filename="gen.yaml")
    except TaskFileError as error:
        assert error.line == expected_line
        assert error.field == ("zz_unknown_field" if where == "top" else "resources.zz_unknown_field")
    else:
        raise AssertionError("an unknown field was accepted")


@settings(max_examples=60, deadline=None)
@given(task=task_dicts, key=st.sampled_from(["num_nodes", "cpus", "use_spot", "priority"]))
def test_wrong_type_error_points_at_the_fields_line(task: dict[str, Any], key: str) -> None:
    bad = {"num_nodes": "many", "cpus": [1], "use_spot": "sure", "priority": "high"}[key]
    if key == "num_nodes":
        task["num_nodes"] = bad
    else:
        task["resources"][key] = bad
    text = yaml.safe_dump(task, sort_keys=False)
    expected_line = next(
        i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(f"{key}:")
    )
    try:
        load_pipeline(text)
    except TaskFileError as error:
        assert error.line == expected_line
        assert error.field is not None and error.field.endswith(key)
    else:
        raise AssertionError("a wrong type was accepted")
