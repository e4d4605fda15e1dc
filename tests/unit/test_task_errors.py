"""Every kind of task-file mistake gives a TaskFileError naming file, line, field, expected and found."""

from __future__ import annotations

import textwrap

import pytest

from shared.errors import TaskFileError, UserError
from shared.task.loader import load_pipeline


def error_for(text: str, **kwargs: object) -> TaskFileError:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline(textwrap.dedent(text), filename="task.yaml", **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_unknown_top_level_field_names_line_and_suggests_the_close_one() -> None:
    error = error_for(
        """\
        name: x
        run: echo hi
        resoruces:
          cpus: 2
        """
    )
    assert (error.file, error.line, error.field) == ("task.yaml", 3, "resoruces")
    assert "unknown field 'resoruces'" in error.message
    assert error.hint == "Instead of 'resoruces', did you mean 'resources'?"


def test_unknown_field_without_a_close_match_lists_the_known_fields() -> None:
    error = error_for("zzzzqqq: 1\n")
    assert error.field == "zzzzqqq"
    assert error.hint is not None and "num_nodes" in error.hint and "resources" in error.hint


def test_spot_recovery_is_rejected_with_the_skypilot_hint() -> None:
    error = error_for(
        """\
        resources:
          use_spot: true
          spot_recovery: FAILOVER
        """
    )
    assert (error.line, error.field) == (3, "resources.spot_recovery")
    assert error.hint == "Instead of 'spot_recovery', did you mean 'job_recovery'?"


def test_unknown_field_inside_an_any_of_alternative_names_its_index() -> None:
    error = error_for(
        """\
        resources:
          any_of:
            - infra: aws
            - infra: gcp
              acclerators: A100:8
        """
    )
    assert (error.line, error.field) == (5, "resources.any_of[1].acclerators")
    assert error.hint == "Instead of 'acclerators', did you mean 'accelerators'?"


def test_unknown_field_in_a_storage_object_is_named_with_its_mount_path() -> None:
    error = error_for(
        """\
        file_mounts:
          /ckpt:
            name: bucket
            moed: MOUNT
        """
    )
    assert (error.line, error.field) == (4, "file_mounts./ckpt.moed")
    assert error.hint == "Instead of 'moed', did you mean 'mode'?"


def test_unknown_job_recovery_field_is_named_not_the_union_branch() -> None:
    error = error_for("resources:\n  job_recovery:\n    stratgy: FAILOVER\n")
    assert (error.line, error.field) == (3, "resources.job_recovery.stratgy")


def test_wrong_type_says_what_was_expected_and_found() -> None:
    error = error_for("name: x\nnum_nodes: two\n")
    assert (error.line, error.field) == (2, "num_nodes")
    assert "integer" in error.message and "'two'" in error.message


def test_quoted_number_is_not_coerced_to_an_integer() -> None:
    error = error_for("num_nodes: '2'\n")
    assert error.field == "num_nodes" and "'2'" in error.message


def test_union_type_error_lists_every_accepted_shape() -> None:
    error = error_for("workdir: 5\n")
    assert error.field == "workdir"
    assert error.message == "expected a string or a mapping; found 5"


def test_num_nodes_below_one_is_rejected() -> None:
    error = error_for("num_nodes: 0\n")
    assert error.field == "num_nodes" and "greater than or equal to 1" in error.message


def test_use_spot_must_be_a_boolean() -> None:
    error = error_for("resources:\n  use_spot: 'yes'\n")
    assert (error.line, error.field) == (2, "resources.use_spot")


def test_null_env_without_override_names_the_variable() -> None:
    error = error_for(
        """\
        envs:
          A: one
          BUCKET:
        run: echo $BUCKET
        """
    )
    assert (error.line, error.field) == (3, "envs.BUCKET")
    assert "Environment variable 'BUCKET' is None" in error.message


def test_null_secret_without_override_names_the_secret() -> None:
    error = error_for("secrets:\n  HF_TOKEN: null\n")
    assert (error.line, error.field) == (2, "secrets.HF_TOKEN")
    assert "Secret 'HF_TOKEN' is None" in error.message


def test_env_name_that_is_not_a_shell_name_is_rejected() -> None:
    error = error_for("envs:\n  1BAD: x\n")
    assert error.field == "envs" and "'1BAD'" in error.message


def test_infra_and_cloud_together_point_at_the_cloud_line() -> None:
    error = error_for(
        """\
        resources:
          infra: aws/us-east-1
          cloud: aws
        """
    )
    assert (error.line, error.field) == (3, "resources.cloud")
    assert "'infra' and 'cloud' are both set" in error.message


def test_any_of_and_ordered_together_are_rejected() -> None:
    error = error_for(
        """\
        resources:
          any_of:
            - infra: aws
          ordered:
            - infra: gcp
        """
    )
    assert (error.line, error.field) == (4, "resources.ordered")
    assert "cannot both be set" in error.message


@pytest.mark.parametrize("bad", ["A100:x", "A100:8:2", ":8", "A100:0", "A100:-1"])
def test_bad_accelerator_strings_are_rejected(bad: str) -> None:
    error = error_for(f"resources:\n  accelerators: '{bad}'\n")
    assert (error.line, error.field) == (2, "resources.accelerators")
    assert bad in error.message


def test_accelerator_count_of_wrong_type_in_a_mapping_is_rejected() -> None:
    error = error_for("resources:\n  accelerators: {A100: eight}\n")
    assert error.field is not None and error.field.startswith("resources.accelerators")


@pytest.mark.parametrize(
    ("field", "value"),
    [("cpus", "four"), ("cpus", "0"), ("memory", "2y"), ("memory", "8GBx"), ("disk_size", "big")],
)
def test_bad_cpus_memory_and_disk_values_are_rejected(field: str, value: str) -> None:
    error = error_for(f"resources:\n  {field}: '{value}'\n")
    assert (error.line, error.field) == (2, f"resources.{field}")


def test_unknown_cloud_suggests_the_close_one_and_cloud_case_is_ignored() -> None:
    error = error_for("resources:\n  cloud: azur\n")
    assert error.field == "resources.cloud" and "did you mean 'azure'" in error.message
    pipeline = load_pipeline("resources:\n  cloud: AzUrE\n")
    assert pipeline.tasks[0].resources.cloud == "azure"


def test_unknown_recovery_strategy_is_rejected() -> None:
    error = error_for("resources:\n  job_recovery: SOMETIMES\n")
    assert error.field == "resources.job_recovery" and "EAGER_NEXT_REGION" in error.message


@pytest.mark.parametrize("ports", ["70000", "'10-5'", "[8080, 'x']"])
def test_bad_ports_are_rejected(ports: str) -> None:
    error = error_for(f"resources:\n  ports: {ports}\n")
    assert error.field == "resources.ports"


def test_priority_outside_its_range_is_rejected() -> None:
    assert error_for("resources:\n  priority: 5000\n").field == "resources.priority"


def test_inputs_with_two_entries_are_rejected() -> None:
    error = error_for("inputs:\n  s3://a: 1\n  s3://b: 2\n")
    assert error.field == "inputs" and "exactly one entry" in error.message


def test_storage_object_without_name_or_source_loads_and_is_refused_at_launch_not_at_plan() -> None:
    from shared.jobs.file_mounts import mount_sources
    from shared.storage.access import StorageWalls

    (task,) = load_pipeline("file_mounts:\n  /ckpt:\n    name:\n    mode: MOUNT\n", filename="t.yaml").tasks
    with pytest.raises(UserError) as raised:
        mount_sources(task, walls=StorageWalls("b"), filename="t.yaml")
    assert raised.value.field == "file_mounts./ckpt" and "names no bucket" in raised.value.message


def test_empty_file_is_a_clear_error() -> None:
    for text in ("", "\n# only a comment\n", "---\n---\n"):
        error = error_for(text)
        assert "empty" in error.message and error.file == "task.yaml"


def test_a_document_that_is_not_a_mapping_is_rejected_with_its_line() -> None:
    error = error_for("name: x\n---\n- a\n- b\n")
    assert error.line == 3 and "a list" in error.message


def test_yaml_syntax_error_names_the_line() -> None:
    error = error_for("name: x\nresources:\n  cpus: [1, 2\nrun: echo\n")
    assert error.line is not None and error.line >= 3 and "invalid YAML" in error.message


def test_job_group_header_with_unknown_field_is_rejected() -> None:
    error = error_for(
        """\
        name: group
        execution: parallel
        primary_task: [a]
        ---
        name: a
        run: echo a
        """
    )
    assert (error.line, error.field) == (3, "primary_task")
    assert error.hint == "Instead of 'primary_task', did you mean 'primary_tasks'?"


def test_job_group_primary_task_must_name_a_job() -> None:
    error = error_for(
        """\
        name: group
        execution: parallel
        primary_tasks: [a, c]
        ---
        name: a
        ---
        name: b
        """
    )
    assert (error.line, error.field) == (3, "primary_tasks[1]")
    assert "'c'" in error.message


def test_job_group_jobs_need_unique_names() -> None:
    error = error_for("name: g\nexecution: parallel\n---\nname: a\n---\nname: a\n")
    assert "'a'" in error.message and (error.line, error.field) == (6, "name")
    error = error_for("name: g\nexecution: parallel\n---\nrun: echo\n")
    assert "needs a 'name'" in error.message


def test_job_group_termination_delay_must_be_a_duration() -> None:
    error = error_for("name: g\nexecution: parallel\ntermination_delay: soon\n---\nname: a\n")
    assert (error.line, error.field) == (3, "termination_delay")


def test_pipeline_header_with_unknown_execution_is_rejected() -> None:
    error = error_for("name: p\nexecution: sideways\n---\nname: a\n")
    assert (error.line, error.field) == (2, "execution")


def test_header_with_execution_but_no_tasks_is_rejected() -> None:
    error = error_for("name: p\nexecution: parallel\n")
    assert error.field == "execution"


def test_errors_in_a_later_document_carry_that_documents_line() -> None:
    error = error_for(
        """\
        name: p
        ---
        name: a
        run: echo a
        ---
        name: b
        num_nodes: -3
        """
    )
    assert (error.line, error.field) == (7, "num_nodes")


def test_error_renders_as_one_line_with_file_and_line() -> None:
    error = error_for("resources:\n  spot_recovery: FAILOVER\n")
    assert str(error).startswith("task.yaml:2: resources.spot_recovery: unknown field 'spot_recovery'")
    assert error.to_dict()["line"] == 2


def test_envs_as_a_list_is_a_type_error_not_a_missing_value() -> None:
    error = error_for("envs: [A, B]\n")
    assert error.field == "envs" and "mapping" in error.message


def test_a_control_character_is_a_task_file_error_with_its_line() -> None:
    with pytest.raises(TaskFileError) as caught:
        load_pipeline('name: ok\nrun: "echo \x08"\n', filename="ctrl.yaml")
    assert caught.value.line == 2
    assert caught.value.file == "ctrl.yaml"
    assert "not allowed" in caught.value.message
