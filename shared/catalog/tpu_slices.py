"""Google Cloud TPU slices by name: chips, high-bandwidth memory and the host VM each worker runs on.

A slice is named `tpu-<generation>-<size>` (SkyPilot's spelling of GCP's accelerator type
`<generation>-<size>`). Its size counts chips for v5e (`v5litepod`) and v6e, TensorCores (two per
chip) for v2, v3, v4 and v5p. Host figures are one worker VM's, from Google's TPU documentation;
slices larger than one host have several such workers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^tpu-(?P<generation>v\w+?)-(?P<size>\d+)$")


@dataclass(frozen=True, slots=True)
class TpuGeneration:
    cores_per_chip: int
    hbm_per_chip_gib: float
    chips_per_host: int
    host_vcpus: float  # one worker VM of a full host
    host_memory_gib: float


GENERATIONS: dict[str, TpuGeneration] = {
    "v2": TpuGeneration(2, 16, 4, 96, 335),
    "v3": TpuGeneration(2, 32, 4, 96, 335),
    "v4": TpuGeneration(2, 32, 4, 240, 407),
    "v5litepod": TpuGeneration(1, 16, 4, 112, 192),
    "v5p": TpuGeneration(2, 95, 4, 208, 448),
    "v6e": TpuGeneration(1, 32, 4, 180, 720),
}
# Single-host slices whose worker VM differs from the generation's usual host.
_SMALL_HOSTS: dict[str, tuple[float, float]] = {
    "tpu-v5litepod-1": (24, 48),
    "tpu-v5litepod-8": (224, 384),
    "tpu-v6e-1": (44, 176),
    "tpu-v6e-8": (180, 1440),
}


@dataclass(frozen=True, slots=True)
class TpuSlice:
    name: str  # tpu-v5litepod-16
    accelerator_type: str  # what the TPU API calls it: v5litepod-16
    chips: int
    hosts: int
    hbm_gib: float
    host_vcpus: float
    host_memory_gib: float


def tpu_slice(name: str) -> TpuSlice | None:
    """The slice a canonical TPU name describes, or None for a name of an unknown generation."""
    match = _NAME.match(name)
    if match is None or match["generation"] not in GENERATIONS:
        return None
    generation = GENERATIONS[match["generation"]]
    chips = max(1, int(match["size"]) // generation.cores_per_chip)
    vcpus, memory = _SMALL_HOSTS.get(name, (generation.host_vcpus, generation.host_memory_gib))
    return TpuSlice(
        name=name,
        accelerator_type=name.removeprefix("tpu-"),
        chips=chips,
        hosts=max(1, -(-chips // generation.chips_per_host)) if name not in _SMALL_HOSTS else 1,
        hbm_gib=float(chips * generation.hbm_per_chip_gib),
        host_vcpus=float(vcpus),
        host_memory_gib=float(memory),
    )
