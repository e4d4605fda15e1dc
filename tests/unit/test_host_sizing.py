"""Machines sized the way SkyPilot sizes them (shared.optimizer.host_defaults), planned from task files on the
built-in catalog: default families and cpus/memory for CPU tasks, GCP's N1 host sizes for attached GPUs,
CPU tasks on GPU machines where a cloud sells nothing else, no multi-node clusters where SkyPilot has
none, and TPU slices."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.catalog.model import BuiltinSource, Catalog, build_catalog
from shared.errors import NoOfferingError
from shared.optimizer import plan_pipeline, plan_task
from shared.optimizer.host_defaults import family_of, sized_for
from shared.task.loader import load_pipeline_file
from shared.task.requests import ResourceRequest

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return build_catalog([BuiltinSource()])


def plan_file(name: str, catalog: Catalog, **options: object):  # type: ignore[no-untyped-def]
    return plan_pipeline(load_pipeline_file(FILES / name), catalog, **options)  # type: ignore[arg-type]


def test_families_are_read_the_way_skypilot_names_them() -> None:
    assert family_of("aws", "m6i.2xlarge") == "m6i"
    assert family_of("gcp", "n2-highmem-8") == "n2-highmem"
    assert family_of("azure", "Standard_D8s_v5") == "Ds_v5"
    assert family_of("azure", "Standard_E4-2s_v5") == "E_s_v5"
    assert family_of("azure", "Standard_D8as_v5") == "Das_v5"


def test_a_task_naming_no_hardware_gets_8_plus_cpus_and_4_gib_per_vcpu_of_the_default_families(
    builtin: Catalog,
) -> None:
    (task,) = plan_file("cpu_default.yaml", builtin).tasks
    chosen = task.chosen
    assert (chosen.cloud, chosen.instance_type, chosen.vcpus, chosen.memory_gib) == (
        "aws",
        "m6i.2xlarge",
        8,
        32,
    )
    for c in task.candidates:
        if c.accelerator is None:
            assert c.vcpus >= 8 and c.memory_gib >= 4 * c.vcpus
            assert family_of(c.cloud, c.instance_type) in {
                "m6i",
                "c6i",
                "r6i",
                "n2-standard",
                "n2-highmem",
                "Ds_v5",
                "Es_v5",
            }
    assert not any(c.instance_type.startswith("e2-") for c in task.candidates)


def test_cpus_without_memory_asks_4_gib_per_vcpu_so_compute_optimized_machines_do_not_fit(
    builtin: Catalog,
) -> None:
    (task,) = plan_file("cpu_4_no_memory.yaml", builtin).tasks
    cpu_only = [c for c in task.candidates if c.accelerator is None]
    assert {c.instance_type for c in cpu_only} >= {"m6i.xlarge", "n2-standard-4", "Standard_D4s_v5"}
    assert not any(c.instance_type.startswith("c6i.") and c.vcpus < 8 for c in cpu_only)
    assert task.chosen.instance_type == "m6i.xlarge"


def test_a_t4_on_gcp_gets_skypilots_n1_host_of_4_plus_cpus_and_16_plus_gib(builtin: Catalog) -> None:
    (task,) = plan_file("t4_no_cpus.yaml", builtin).tasks
    assert task.chosen.instance_type == "n1-highmem-4"
    assert all(c.vcpus >= 4 and c.memory_gib >= 16 for c in task.candidates)
    assert "n1-standard-4" not in {c.instance_type for c in task.candidates}


def test_gcp_n1_defaults_follow_the_gpu_count_and_yield_to_what_the_task_says() -> None:
    t4 = ResourceRequest(accelerator="T4", accelerator_count=1)
    assert (sized_for(t4, "gcp").cpus, sized_for(t4, "gcp").memory_gib) == (4.0, 16.0)  # type: ignore[union-attr]
    v100x2 = ResourceRequest(accelerator="V100", accelerator_count=2)
    assert (sized_for(v100x2, "gcp").cpus, sized_for(v100x2, "gcp").memory_gib) == (16.0, 64.0)  # type: ignore[union-attr]
    given = sized_for(ResourceRequest(accelerator="T4", accelerator_count=1, cpus=2.0), "gcp")
    assert (given.cpus, given.memory_gib) == (2.0, 8.0)  # type: ignore[union-attr]
    assert sized_for(t4, "aws") == ResourceRequest(cloud="aws", accelerator="T4", accelerator_count=1)
    a100 = ResourceRequest(accelerator="A100", accelerator_count=8)
    assert sized_for(a100, "gcp").cpus is None  # type: ignore[union-attr]


def test_runpod_is_not_offered_for_several_nodes_and_the_reason_names_num_nodes(builtin: Catalog) -> None:
    (task,) = plan_file("h100_two_nodes.yaml", builtin).tasks
    assert "runpod" not in {c.cloud for c in task.candidates}
    assert task.chosen.num_nodes == 2
    with pytest.raises(NoOfferingError) as caught:
        plan_file("h100_two_nodes_runpod.yaml", builtin)
    assert caught.value.field == "num_nodes"
    assert "runpod runs no multi-node clusters (num_nodes: 2)" in caught.value.message


def test_a_cpu_step_between_lambda_gpu_steps_runs_on_a_gpu_machine_to_save_egress(
    builtin: Catalog,
) -> None:
    plan = plan_file("cpu_between_lambda_tasks.yaml", builtin)
    middle = plan.tasks[1].chosen
    # RunPod and Lambda charge no egress and sell only GPU machines: SkyPilot puts the CPU step there
    assert middle.cloud in {"lambda", "runpod"} and middle.accelerator is not None
    assert plan.egress_cost == 0
    alone = plan_task(
        load_pipeline_file(FILES / "cpu_4_no_memory.yaml").tasks[0].resource_choice(), 1, builtin
    )
    assert middle.hourly_price > alone[0].hourly_price  # dearer per hour, cheaper with the data it moves


@pytest.mark.parametrize(
    ("name", "accelerator", "price"),
    [("tpu_v5e_16.yaml", "tpu-v5litepod-16", 19.2), ("tpu_v4_8.yaml", "tpu-v4-8", 12.88)],
)
def test_tpu_slices_plan_as_tpu_vms_priced_per_chip(
    builtin: Catalog, name: str, accelerator: str, price: float
) -> None:
    (task,) = plan_file(name, builtin).tasks
    chosen = task.chosen
    assert (chosen.cloud, chosen.instance_type, chosen.accelerator) == ("gcp", "TPU-VM", accelerator)
    assert chosen.hourly_price == pytest.approx(price)


def test_a_spot_tpu_uses_the_spot_price(builtin: Catalog) -> None:
    (task,) = plan_file("tpu_v6e_8_spot.yaml", builtin).tasks
    assert task.chosen.use_spot and task.chosen.hourly_price == pytest.approx(8 * 0.51)
