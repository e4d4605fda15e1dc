"""How SkyPilot sizes a machine per cloud when a task leaves it open, and which clouds run multi-node.

From SkyPilot's catalogs (sky/catalog/<cloud>_catalog.py) and clouds (sky/clouds/<cloud>.py):
- A CPU-only task (no accelerator, no instance type) gets, on each cloud, a machine of that cloud's
  default families (AWS m6i/m7i/r6i/r7i/c6i/c7i, GCP n2/n4, Azure Ds_v5/Es_v5/Fs_v2) with `cpus: 8+`
  when it names neither cpus nor memory, and memory `4x` (GiB per vCPU) when it names no memory.
  Lambda Cloud has no CPU machines: its default is `cpus: 30+`, `4x` on its GPU machines. RunPod, Vast
  and clouds without a table here have no default and no family: any machine, GPU hosts included.
- A GPU on a GCP N1 host (T4, V100, P100, P4, K80) gets `cpus: <per GPU count>+` and memory `4x` those
  cpus when the task names neither; accelerator-optimized machines (a2, a3, a4, g2) and TPU VMs come
  as they are. Other clouds' GPU machines come as they are.
- RunPod, Vast and a few others do not run multi-node clusters (`MULTI_NODE` is unsupported there).

`sized_for(request, cloud, num_nodes)` turns a request into the request SkyPilot would make of that
cloud, or None when the cloud cannot run it at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache

from shared.task.requests import ResourceRequest


@dataclass(frozen=True, slots=True)
class CpuHostDefaults:
    vcpus: float | None  # `cpus: N+` when a task names neither cpus nor memory
    memory_per_vcpu: float | None  # `memory: Nx` when a task names no memory
    families: tuple[str, ...] | None  # the machine families a CPU-only task may get; None = any machine


CPU_HOSTS: dict[str, CpuHostDefaults] = {
    "aws": CpuHostDefaults(8, 4, ("m6i", "m6id", "m7i", "r6i", "r6id", "r7i", "c6i", "c6id", "c7i")),
    "gcp": CpuHostDefaults(
        8, 4, ("n2-standard", "n2-highmem", "n2-highcpu", "n4-standard", "n4-highcpu", "n4-highmem")
    ),
    "azure": CpuHostDefaults(8, 4, ("Ds_v5", "Es_v5", "Fs_v2")),
    "lambda": CpuHostDefaults(30, 4, None),
}
ANY_HOST = CpuHostDefaults(None, None, None)

# GCP N1 hosts for attached GPUs: the `cpus: N+` SkyPilot asks per (GPU, count) (gcp_catalog.py
# _NUM_ACC_TO_NUM_CPU), and memory 4 GiB per vCPU of that. Fixed-host GPUs and TPUs are not here.
GCP_N1_HOST_CPUS: dict[str, dict[int, int]] = {
    "K80": {1: 4, 2: 8, 4: 16, 8: 32, 16: 64},
    "V100": {1: 8, 2: 16, 4: 32, 8: 64},
    "T4": {1: 4, 2: 8, 4: 48},
    "P100": {1: 8, 2: 16, 4: 32, 8: 64},
    "DEFAULT": {1: 8, 2: 16, 4: 32, 8: 64, 16: 128},
}
GCP_FIXED_HOST_ACCELERATORS = frozenset({"A100", "A100-80GB", "L4", "H100", "H100-MEGA", "H200", "B200"})
GCP_GPU_MEMORY_PER_VCPU = 4.0

# Clouds SkyPilot marks CloudImplementationFeatures.MULTI_NODE unsupported, among those it knows.
NO_MULTI_NODE = frozenset({"runpod", "vast", "hyperbolic", "fluidstack", "scp", "seeweb"})

_AZURE_SIZE = re.compile(r"^([A-Za-z]+)([0-9]+)(-[0-9]+)?(.*)$")


@cache
def family_of(cloud: str, instance_type: str) -> str:
    """The family SkyPilot's default lists name: `m6i.2xlarge` → `m6i`, `n2-standard-8` → `n2-standard`,
    `Standard_D8s_v5` → `Ds_v5` (a constrained-vCPU size such as `Standard_E4-2s_v5` → `E_s_v5`)."""
    if cloud == "azure":
        size = instance_type.removeprefix("Standard_").removesuffix("_Promo")
        match = _AZURE_SIZE.match(size)
        if match is None:
            return size
        letters, _, constrained, rest = match.groups()
        return f"{letters}_{rest}" if constrained else f"{letters}{rest}"
    if cloud == "aws":
        return instance_type.split(".", 1)[0]
    if cloud == "gcp":
        return instance_type.rsplit("-", 1)[0]
    return instance_type


def in_families(cloud: str, instance_type: str, families: tuple[str, ...] | None) -> bool:
    return families is None or family_of(cloud, instance_type) in families


def multi_node_supported(cloud: str) -> bool:
    return cloud not in NO_MULTI_NODE


def sized_for(request: ResourceRequest, cloud: str, num_nodes: int = 1) -> ResourceRequest | None:
    """The request as SkyPilot makes it of `cloud`: its defaults filled in; None if the cloud cannot
    run it (a cloud pin elsewhere, or several nodes on a cloud without multi-node clusters)."""
    if request.cloud is not None and request.cloud != cloud:
        return None
    if num_nodes > 1 and not multi_node_supported(cloud):
        return None
    pinned = replace(request, cloud=cloud)
    if request.instance_type is not None:
        return pinned
    if request.accelerator is None:
        return _cpu_only(pinned, CPU_HOSTS.get(cloud, ANY_HOST))
    if cloud == "gcp":
        return _gcp_gpu_host(pinned)
    return pinned


def _cpu_only(request: ResourceRequest, defaults: CpuHostDefaults) -> ResourceRequest:
    cpus, at_least = request.cpus, request.cpus_at_least
    if cpus is None and request.memory_gib is None and request.memory_per_vcpu is None:
        cpus, at_least = defaults.vcpus, True
    ratio = request.memory_per_vcpu
    if request.memory_gib is None and ratio is None:
        ratio = defaults.memory_per_vcpu
    return replace(
        request,
        cpus=cpus,
        cpus_at_least=at_least,
        memory_per_vcpu=ratio,
        host_families=defaults.families,
        any_host=defaults.families is None,
    )


def _gcp_gpu_host(request: ResourceRequest) -> ResourceRequest:
    name = request.accelerator or ""
    if name in GCP_FIXED_HOST_ACCELERATORS or name.startswith("tpu-"):
        return request
    per_count = GCP_N1_HOST_CPUS.get(name, GCP_N1_HOST_CPUS["DEFAULT"])
    count = int(request.accelerator_count or 1) if float(request.accelerator_count or 1).is_integer() else 0
    cpus, at_least = request.cpus, request.cpus_at_least
    if cpus is None and request.memory_gib is None and request.memory_per_vcpu is None:
        default = per_count.get(count)
        if default is None:
            return request
        cpus, at_least = float(default), True
    if request.memory_gib is not None or request.memory_per_vcpu is not None or cpus is None:
        return replace(request, cpus=cpus, cpus_at_least=at_least)
    return replace(
        request,
        cpus=cpus,
        cpus_at_least=at_least,
        memory_gib=cpus * GCP_GPU_MEMORY_PER_VCPU,
        memory_at_least=True,
    )
