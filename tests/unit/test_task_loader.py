"""Loading task files: pipelines, job groups, env overrides, and the task API the optimizer reads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from shared.errors import TaskFileError
from shared.task.loader import load_pipeline, load_pipeline_file
from shared.task.requests import ResourceRequest
from shared.task.spec import Pipeline


def load(text: str, **kwargs: object) -> Pipeline:
    return load_pipeline(textwrap.dedent(text), **kwargs)  # type: ignore[arg-type]


def test_single_document_is_a_one_task_pipeline_named_after_the_task() -> None:
    pipeline = load("name: hello\nnum_nodes: 2\nrun: echo hi\n")
    assert (pipeline.name, pipeline.execution, len(pipeline.tasks)) == ("hello", "serial", 1)
    task = pipeline.tasks[0]
    assert (task.name, task.num_nodes, task.run, task.setup) == ("hello", 2, "echo hi", None)


def test_name_only_header_makes_a_chain_of_the_following_documents() -> None:
    pipeline = load(
        """\
        name: chain
        ---
        name: a
        run: echo a
        ---
        name: b
        run: echo b
        """
    )
    assert (pipeline.name, pipeline.execution) == ("chain", "serial")
    assert [t.name for t in pipeline.tasks] == ["a", "b"]


def test_serial_header_is_a_chain() -> None:
    pipeline = load("name: p\nexecution: serial\n---\nname: a\n---\nname: b\n")
    assert (pipeline.execution, [t.name for t in pipeline.tasks]) == ("serial", ["a", "b"])


def test_documents_without_a_header_are_a_nameless_chain() -> None:
    pipeline = load("name: a\nrun: echo a\n---\nname: b\nrun: echo b\n")
    assert pipeline.name is None
    assert [t.name for t in pipeline.tasks] == ["a", "b"]


def test_header_alone_still_makes_one_task() -> None:
    pipeline = load("name: lonely\n")
    assert pipeline.name == "lonely" and [t.name for t in pipeline.tasks] == ["lonely"]


def test_parallel_header_makes_a_job_group_with_its_settings() -> None:
    pipeline = load(
        """\
        name: group
        execution: parallel
        primary_tasks: [trainer]
        termination_delay: {default: 30s, buffer: 1m}
        ---
        name: trainer
        resources: {accelerators: H100:8}
        ---
        name: buffer
        resources: {cpus: 8+}
        """
    )
    assert (pipeline.name, pipeline.execution) == ("group", "parallel")
    assert pipeline.primary_tasks == ["trainer"]
    assert pipeline.termination_delay == {"default": "30s", "buffer": "1m"}
    assert [t.name for t in pipeline.tasks] == ["trainer", "buffer"]


def test_env_overrides_fill_nulls_and_replace_values_in_every_task() -> None:
    pipeline = load(
        """\
        name: p
        ---
        name: a
        envs: {BUCKET: null, MODE: fast}
        ---
        name: b
        """,
        env_overrides={"BUCKET": "s3://b", "MODE": "slow"},
    )
    assert pipeline.tasks[0].envs == {"BUCKET": "s3://b", "MODE": "slow"}
    assert pipeline.tasks[1].envs == {"BUCKET": "s3://b", "MODE": "slow"}


def test_env_values_that_are_numbers_become_strings_like_skypilot() -> None:
    task = load("envs:\n  PORT: 8080\n  RATIO: 0.5\n  FLAG: true\n").tasks[0]
    assert task.envs == {"PORT": "8080", "RATIO": "0.5", "FLAG": "True"}


def test_secret_overrides_fill_null_secrets_and_list_form_secrets() -> None:
    task = load("secrets:\n  HF_TOKEN: null\n  KEEP: v\n", secret_overrides={"HF_TOKEN": "t"}).tasks[0]
    assert task.secrets == {"HF_TOKEN": "t", "KEEP": "v"}
    task = load("secrets: [A, B]\n", secret_overrides={"A": "1", "B": "2", "C": "3"}).tasks[0]
    assert task.secrets == {"A": "1", "B": "2"}


def test_envs_are_substituted_into_file_mounts_and_workdir() -> None:
    task = load(
        """\
        envs:
          BUCKET: my-bucket
        workdir: ~/code/$BUCKET
        file_mounts:
          /data/${BUCKET}: s3://${BUCKET}/data
          /ckpt:
            name: $BUCKET
            mode: MOUNT
        run: echo $BUCKET
        """
    ).tasks[0]
    assert task.workdir == "~/code/my-bucket"
    assert task.file_mounts is not None
    assert task.file_mounts["/data/my-bucket"] == "s3://my-bucket/data"
    assert task.file_mounts["/ckpt"].name == "my-bucket"  # type: ignore[union-attr]
    assert task.run == "echo $BUCKET"  # the shell expands it on the node, not the loader


def test_git_workdir_is_read_as_url_and_ref() -> None:
    task = load("workdir:\n  url: https://github.com/org/repo.git\n  ref: main\n").tasks[0]
    assert task.workdir is not None and not isinstance(task.workdir, str)
    assert (task.workdir.url, task.workdir.ref) == ("https://github.com/org/repo.git", "main")


def test_service_and_pool_are_read_and_reported_unsupported() -> None:
    task = load("service:\n  replicas: 2\npool:\n  workers: 1\nrun: echo\n").tasks[0]
    assert task.service is not None and task.service.model_dump(exclude_none=True) == {"replicas": 2}
    assert task.unsupported == [
        "service: read, not run: the task runs as one job, not a SkyServe service (no replicas, "
        "no load balancer)",
        "pool: read, not run: skyless has no worker pools; the task runs as one job",
    ]
    assert load("run: echo\n").tasks[0].unsupported == []


def test_inputs_and_outputs_give_egress_sizes() -> None:
    task = load("inputs: {s3://in: 150}\noutputs: {s3://out: 2.5}\n").tasks[0]
    assert (task.inputs_gb, task.outputs_gb) == (150.0, 2.5)
    assert (load("run: x\n").tasks[0].inputs_gb, load("run: x\n").tasks[0].outputs_gb) == (0.0, 0.0)


def test_resource_choice_plain_cpu_task() -> None:
    choice = load("resources:\n  cpus: 4+\n  memory: 16\n  use_spot: true\n").tasks[0].resource_choice()
    assert choice.ordered is False
    assert choice.requests == (
        ResourceRequest(cpus=4.0, cpus_at_least=True, memory_gib=16.0, memory_at_least=False, use_spot=True),
    )


def test_resource_choice_exact_cpus_and_ratio_memory() -> None:
    (request,) = load("resources:\n  cpus: 4\n  memory: 2x\n").tasks[0].resource_choice().requests
    assert (request.cpus, request.cpus_at_least, request.memory_gib, request.memory_per_vcpu) == (
        4.0,
        False,
        None,
        2.0,
    )


def test_ratio_memory_is_per_vcpu_of_the_machine_with_or_without_cpus() -> None:
    (request,) = load("resources:\n  memory: 4x\n").tasks[0].resource_choice().requests
    assert (request.memory_gib, request.memory_per_vcpu) == (None, 4.0)


def test_memory_units_are_converted_to_gib() -> None:
    (request,) = load("resources:\n  memory: 1TB+\n").tasks[0].resource_choice().requests
    assert (request.memory_gib, request.memory_at_least) == (1024.0, True)


def test_resource_choice_from_infra_and_from_fields() -> None:
    (request,) = load("resources:\n  infra: aws/us-east-1/us-east-1a\n").tasks[0].resource_choice().requests
    assert (request.cloud, request.region, request.zone) == ("aws", "us-east-1", "us-east-1a")
    (request,) = load("resources:\n  cloud: GCP\n  region: us-central1\n").tasks[0].resource_choice().requests
    assert (request.cloud, request.region, request.zone) == ("gcp", "us-central1", None)
    (request,) = load("resources:\n  infra: '*/us-west-2'\n").tasks[0].resource_choice().requests
    assert (request.cloud, request.region) == (None, "us-west-2")
    (request,) = load("resources:\n  infra: k8s/my-context\n").tasks[0].resource_choice().requests
    assert (request.cloud, request.region) == ("kubernetes", "my-context")


def test_accelerator_alternatives_each_become_a_request_with_canonical_names() -> None:
    choice = (
        load("resources:\n  accelerators: {a100-80g: 8, H100: 8, V100: null}\n").tasks[0].resource_choice()
    )
    assert [(r.accelerator, r.accelerator_count) for r in choice.requests] == [
        ("A100-80GB", 8.0),
        ("H100", 8.0),
        ("V100", 1.0),
    ]
    choice = load("resources:\n  accelerators: ['L4:1', 'T4', {A10G: 2}]\n").tasks[0].resource_choice()
    assert [(r.accelerator, r.accelerator_count) for r in choice.requests] == [
        ("L4", 1.0),
        ("T4", 1.0),
        ("A10G", 2.0),
    ]


def test_an_accelerator_list_is_an_ordered_preference_and_a_mapping_is_a_set() -> None:
    listed = load("resources:\n  accelerators: ['L4:1', 'H100:1', 'A100:1']\n").tasks[0].resource_choice()
    assert listed.ordered
    assert [r.accelerator for r in listed.requests] == ["L4", "H100", "A100"]
    assert not load("resources:\n  accelerators: {L4: 1, H100: 1}\n").tasks[0].resource_choice().ordered
    assert not load("resources:\n  accelerators: L4:1\n").tasks[0].resource_choice().ordered


def test_flow_style_accelerator_keys_with_counts_are_read_like_skypilot() -> None:
    choice = load("resources:\n  accelerators: {A100:1, V100:4}\n").tasks[0].resource_choice()
    assert [(r.accelerator, r.accelerator_count) for r in choice.requests] == [("A100", 1.0), ("V100", 4.0)]


def test_any_of_alternatives_inherit_the_shared_fields() -> None:
    choice = (
        load(
            """\
            resources:
              accelerators: A100:8
              use_spot: true
              infra: aws
              any_of:
                - infra: gcp/us-central1
                - cloud: azure
                  accelerators: H100:8
                - use_spot: false
            """
        )
        .tasks[0]
        .resource_choice()
    )
    assert choice.ordered is False
    assert [(r.cloud, r.region, r.accelerator, r.use_spot) for r in choice.requests] == [
        ("gcp", "us-central1", "A100", True),
        ("azure", None, "H100", True),
        ("aws", None, "A100", False),
    ]


def test_ordered_keeps_the_users_order() -> None:
    choice = (
        load("resources:\n  ordered:\n    - infra: gcp\n    - infra: aws\n    - infra: azure\n")
        .tasks[0]
        .resource_choice()
    )
    assert choice.ordered is True
    assert [r.cloud for r in choice.requests] == ["gcp", "aws", "azure"]


def test_pipeline_round_trips_through_json() -> None:
    pipeline = load(
        """\
        name: group
        execution: parallel
        primary_tasks: [a]
        ---
        name: a
        workdir: {url: https://x/y.git, ref: v1}
        envs: {K: v}
        file_mounts:
          /m: {name: bucket, store: s3, mode: mount_cached}
        resources:
          accelerators: {A100: 8, H100: null}
          any_of: [{infra: aws}, {cloud: gcp, region: us-central1}]
          job_recovery: {strategy: failover, recover_on_exit_codes: [3]}
          _docker_login_config: {username: u, password: p, server: s}
        ---
        name: b
        resources: {ordered: [{infra: aws}], cpus: 2}
        """
    )
    data = pipeline.model_dump(mode="json")
    again = Pipeline.model_validate(data)
    assert again == pipeline
    assert [t.resource_choice() for t in again.tasks] == [t.resource_choice() for t in pipeline.tasks]
    assert pipeline.tasks[0].file_mounts["/m"].mode == "MOUNT_CACHED"  # type: ignore[index,union-attr]
    assert pipeline.tasks[0].resources.job_recovery.strategy == "FAILOVER"  # type: ignore[union-attr]


def test_load_pipeline_file_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("num_nodes: 0\n")
    with pytest.raises(TaskFileError) as caught:
        load_pipeline_file(path)
    assert (caught.value.file, caught.value.line) == (str(path), 1)
    with pytest.raises(TaskFileError, match="no such task file"):
        load_pipeline_file(tmp_path / "missing.yaml")


def test_load_pipeline_file_applies_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("envs:\n  X: null\nrun: echo $X\n")
    assert load_pipeline_file(path, env_overrides={"X": "1"}).tasks[0].envs == {"X": "1"}


def test_pipeline_round_trips_in_the_job_store_form_by_alias_without_nones() -> None:
    pipeline = load(
        """\
        resources:
          accelerators: {A100: 8, V100: null}
          _docker_login_config: {username: u, password: p, server: s}
          any_of: [{infra: aws}, {infra: gcp}]
        file_mounts: {/m: {name: b, mode: copy}}
        """
    )
    data = pipeline.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert data["tasks"][0]["resources"]["accelerators"] == {"A100": 8, "V100": None}
    assert "_docker_login_config" in data["tasks"][0]["resources"]
    assert Pipeline.model_validate(data) == pipeline
