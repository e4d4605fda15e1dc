"""The task-file reader cannot be made to choke: aliases, nesting, documents and time are bounded while the
YAML is composed, before anything is expanded; each limit is a TaskFileError naming the limit and the line.

The attacks of issue 19 (a 1 KB "billion laughs", thousands of nesting levels, 1,000 `---` documents) are
parsed in a fresh interpreter so the wall time and the peak memory (ru_maxrss) of the parse are measured."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parse_attacks import ATTACKS, billion_laughs, many_documents, parse_in_fresh_process

from shared.errors import TaskFileError
from shared.task import load_pipeline
from shared.task.limits import (
    MAX_PARSE_SECONDS,
    MAX_TASK_FILE_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_DOCUMENTS,
    MAX_YAML_EXPANDED_CHARS,
    MAX_YAML_NODES,
)
from shared.task.positions import YamlSyntaxError, load_documents


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_of_the_issue_is_refused_quickly_in_bounded_memory(attack: str) -> None:
    text, limit, line = ATTACKS[attack]
    measured = parse_in_fresh_process(text)
    error = measured["error"]
    assert error is not None and error["error"] == "TaskFileError", measured
    assert error["file"] == "attack.yaml" and error["line"] == line, error
    assert "skyless" in error["message"] and _names(limit, error["message"]), error["message"]
    # Before: over a minute and past 3 GB (laughs), a 500 after 13 s (depth), 40 s of planning (documents).
    # CPU time is the parse's own work; wall time is bounded loosely (this machine is shared).
    assert measured["cpu_seconds"] < 1.5 and measured["seconds"] < 10, measured
    assert measured["grown_kib"] < 20 * 1024, measured


def _names(limit: str, message: str) -> bool:
    words = {
        "values": f"{MAX_YAML_NODES:,} values",
        "nesting depth": f"{MAX_YAML_DEPTH} levels",
        "documents": f"{MAX_YAML_DOCUMENTS} YAML documents",
        "expanded text": f"{MAX_YAML_EXPANDED_CHARS // 1024} KiB",
    }
    return words[limit] in message


def test_the_largest_files_within_the_limits_parse_in_bounded_time_and_memory() -> None:
    # the most values a file may hold, every one fresh (no aliases): the slowest thing the limits allow
    flat = "run: echo hi\nfile_mounts:\n  /a: [" + ",".join(["1"] * (MAX_YAML_NODES - 10)) + "]\n"
    # the most text aliases may stand for
    chunk = "x" * (MAX_YAML_EXPANDED_CHARS // 10)
    wide = "run: echo hi\nenvs:\n  A: &a " + chunk + "\n  B: [" + ",".join(["*a"] * 8) + "]\n"
    for text in (flat, wide):
        measured = parse_in_fresh_process(text)
        assert measured["error"] is not None and measured["error"]["line"] in (4, 3), measured
        assert "limit" not in measured["error"]["message"], measured  # refused by the model, not a limit
        assert measured["cpu_seconds"] < MAX_PARSE_SECONDS and measured["seconds"] < 30, measured
        assert measured["grown_kib"] < 80 * 1024, measured


def test_a_laugh_one_level_smaller_than_the_limit_reads_and_one_level_more_is_refused() -> None:
    four = billion_laughs(4)  # 9**4 = 6,561 strings: a legitimate (if odd) use of aliases
    documents = load_documents(four)
    assert len(documents[0].value["file_mounts"]["l3"]) == 9
    with pytest.raises(YamlSyntaxError) as refused:
        load_documents(billion_laughs(5))  # 59,049 strings
    assert refused.value.limit == "values" and refused.value.line == 8


def test_aliased_text_counts_as_the_text_it_stands_for() -> None:
    chunk = "y" * (MAX_YAML_EXPANDED_CHARS // 4)
    text = f"a: &a {chunk}\nb: [*a, *a, *a, *a]\n"
    with pytest.raises(YamlSyntaxError) as refused:
        load_documents(text)
    assert refused.value.limit == "expanded text" and refused.value.line == 2


def test_a_value_that_contains_itself_is_refused_not_walked_forever() -> None:
    for text in ("a: &a [1, *a]\n", "a: &a {b: *a}\n", "run: echo\nenvs: &e\n  X: *e\n"):
        with pytest.raises(YamlSyntaxError) as refused:
            load_documents(text)
        assert refused.value.limit == "recursive alias" and "*" in refused.value.message
    with pytest.raises(TaskFileError) as task_error:
        load_pipeline("run: echo\nenvs: &e\n  X: *e\n", filename="self.yaml")
    assert task_error.value.line == 3 and task_error.value.file == "self.yaml"


def test_anchors_and_merge_keys_as_task_files_use_them_still_read() -> None:
    text = """
envs: &envs
  EPOCHS: "3"
resources:
  any_of:
    - &a100 {accelerators: A100:1, cpus: 4+}
    - <<: *a100
      accelerators: H100:1
run: echo $EPOCHS
"""
    (task,) = load_pipeline(text).tasks
    assert task.envs == {"EPOCHS": "3"} and task.run == "echo $EPOCHS"
    choices = load_documents(text)[0].value["resources"]["any_of"]
    assert choices[1] == {"accelerators": "H100:1", "cpus": "4+"}


def test_nesting_up_to_the_limit_reads_and_one_more_level_is_refused() -> None:
    assert load_documents("x: " + "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1))
    with pytest.raises(YamlSyntaxError) as refused:
        load_documents("x: " + "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH)
    assert refused.value.limit == "nesting depth" and refused.value.line == 1


def test_as_many_tasks_as_the_limit_read_and_one_more_is_refused() -> None:
    assert len(load_pipeline(many_documents(MAX_YAML_DOCUMENTS)).tasks) == MAX_YAML_DOCUMENTS
    with pytest.raises(TaskFileError) as refused:
        load_pipeline(many_documents(MAX_YAML_DOCUMENTS + 1), filename="chain.yaml")
    assert refused.value.line == 3 * MAX_YAML_DOCUMENTS + 1 and "64 YAML documents" in refused.value.message


def test_a_file_past_the_size_limit_is_refused_by_the_loader_itself() -> None:
    text = "run: echo hi\n# " + "x" * MAX_TASK_FILE_BYTES + "\n"
    with pytest.raises(TaskFileError) as refused:
        load_pipeline(text, filename="big.yaml")
    assert refused.value.file == "big.yaml" and f"{MAX_TASK_FILE_BYTES} bytes" in refused.value.message


def test_multibyte_text_is_measured_in_bytes() -> None:
    text = "run: echo hi\n# " + "é" * (MAX_TASK_FILE_BYTES // 2 + 10) + "\n"  # fewer chars than the limit
    with pytest.raises(TaskFileError):
        load_pipeline(text)


values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=40,
)


@given(st.lists(values, min_size=1, max_size=3))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_within_the_limits_the_bounded_reader_reads_what_pyyaml_reads(documents: list[Any]) -> None:
    text = yaml.safe_dump_all(documents)
    assert [d.value for d in load_documents(text)] == list(yaml.safe_load_all(text))


@given(st.integers(1, 3 * MAX_YAML_DEPTH), st.sampled_from(["flow", "block"]))
@settings(max_examples=60, deadline=None)
def test_depth_is_refused_exactly_past_the_limit(depth: int, style: str) -> None:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if style == "flow" else {"k": value}
    text = yaml.safe_dump(value, default_flow_style=style == "flow", width=10**9)
    if depth <= MAX_YAML_DEPTH:
        assert load_documents(text)[0].value == value
    else:
        with pytest.raises(YamlSyntaxError) as refused:
            load_documents(text)
        assert refused.value.limit == "nesting depth"


@given(st.integers(2, 6), st.integers(2, 12))
@settings(max_examples=60, deadline=None)
def test_aliases_are_refused_exactly_when_their_expansion_passes_the_limit(levels: int, fan: int) -> None:
    lines = ["l0: &l0 x"]
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * fan) + "]")
    text = "\n".join(lines) + "\n"
    # the mapping, and each key with its value: l<n> stands for fan**0 + fan**1 + ... + fan**n values
    expanded = 1 + sum(1 + sum(fan**i for i in range(level + 1)) for level in range(levels + 1))
    if expanded <= MAX_YAML_NODES:
        load_documents(text)
    else:
        with pytest.raises(YamlSyntaxError) as refused:
            load_documents(text)
        assert refused.value.limit == "values"


def test_a_parse_past_its_time_limit_stops_where_it_got_to(monkeypatch: pytest.MonkeyPatch) -> None:
    import shared.task.bounded_yaml as bounded

    monkeypatch.setattr(bounded, "MAX_PARSE_SECONDS", -1.0)  # the clock ran out before the first node
    with pytest.raises(TaskFileError) as refused:
        load_pipeline("name: slow\nrun: echo hi\n", filename="slow.yaml")
    assert refused.value.line == 1 and "took more than -1 s of CPU, skyless's limit" in refused.value.message
