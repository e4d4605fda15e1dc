"""Canonical accelerator names: one spelling per accelerator, whatever the user or a catalog wrote.

Matching ignores case, spaces, `-` and `_` (`a100-80gb`, `A100_80GB` and `a100 80gb` are all
`A100-80GB`). TPU names keep their size suffix and are lower-case (`TPU-V4-8` → `tpu-v4-8`).
A name we do not know is not rejected (catalogs grow faster than this list): it is returned
trimmed and upper-cased, so two spellings that differ only in case still meet.
"""

from __future__ import annotations

import re
from functools import cache

# SkyPilot's canonical spellings (skypilot-catalog common/accelerators.csv), plus a few
# accelerators that list lacks but our catalogs sell.
_CANONICAL: tuple[str, ...] = (
    "A10", "A100", "A100-80GB", "A100-80GB-SXM", "A10G", "A30", "A40", "A4000", "A6000", "A800",
    "B200", "GH200", "GTX1660S", "Gaudi HL-205", "H100", "H100-MEGA", "H100-NVL", "H100-NVLINK",
    "H100-SXM", "H200", "H200-SXM", "K80", "L4", "L40", "L40S", "M4000", "M60", "MI25", "MI300X",
    "P100", "P4", "P4000", "RTX3060", "RTX3070", "RTX3080", "RTX3090", "RTX4000-Ada", "RTX4060",
    "RTX4070", "RTX4090", "RTX5060", "RTX5070", "RTX5090", "RTX5880-Ada", "RTX6000", "RTX6000-Ada",
    "RTXA4000", "RTXA4500", "RTXA5000", "RTXA6000", "RTXPRO6000S", "RTXPRO6000WS",
    "Radeon MI25", "Radeon Pro V520", "T4", "T4g", "V100", "V100-32GB",
    "Inferentia", "Inferentia2", "Trainium", "Trainium2",
    "tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5litepod", "tpu-v5p", "tpu-v6e",
)  # fmt: skip

# Other spellings people and catalogs use for the same accelerator.
_ALIASES: dict[str, str] = {
    "A100-80G": "A100-80GB",
    "A100-40GB": "A100",
    "A100-40G": "A100",
    "H100-80GB": "H100",
    "H100-80G": "H100",
    "H200-141GB": "H200",
    "V100-16GB": "V100",
    "V100-32G": "V100-32GB",
    "RTX6000Ada": "RTX6000-Ada",
    "L40S-48GB": "L40S",
    "A10-24GB": "A10",
    "A10G-24GB": "A10G",
    "L4-24GB": "L4",
    "T4-16GB": "T4",
}

# GiB per card, for catalogs that name an accelerator without saying its memory (Azure's).
_MEMORY_GIB: dict[str, float] = {
    "A10": 24, "A100": 40, "A100-80GB": 80, "A100-80GB-SXM": 80, "A10G": 24, "A30": 24, "A40": 48,
    "A6000": 48, "B200": 180, "GH200": 96, "H100": 80, "H100-MEGA": 80, "H100-NVL": 94, "H100-SXM": 80,
    "H200": 141, "H200-SXM": 141, "K80": 12, "L4": 24, "L40": 48, "L40S": 48, "M60": 8, "MI25": 16,
    "MI300X": 192, "P100": 16, "P4": 8, "RTX4090": 24, "RTX5090": 32, "RTXA6000": 48, "T4": 16,
    "V100": 16, "V100-32GB": 32,
}  # fmt: skip

_SEPARATORS = re.compile(r"[\s_\-]+")
_TPU = re.compile(r"^tpu[\s_\-]*(v\w+?)(?:[\s_\-]+(\d+))?$", re.IGNORECASE)


def _key(name: str) -> str:
    return _SEPARATORS.sub("", name).casefold()


def _build_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for name in _CANONICAL:
        table.setdefault(_key(name), name)
    for alias, name in _ALIASES.items():
        table[_key(alias)] = name
    return table


_BY_KEY = _build_table()


@cache
def canonical_name(name: str) -> str:
    """The one spelling of an accelerator name (`a100-80g` → `A100-80GB`, `h100-80gb` → `H100`)."""
    text = " ".join(name.split())
    tpu = _TPU.match(text)
    if tpu:
        family, size = tpu.group(1).lower(), tpu.group(2)
        return f"tpu-{family}-{size}" if size else f"tpu-{family}"
    known = _BY_KEY.get(_key(text))
    if known is not None:
        return known
    return text.upper()


def known_names() -> frozenset[str]:
    """Every canonical accelerator name this module knows (TPU families without their size)."""
    return frozenset(_CANONICAL)


def is_tpu(name: str) -> bool:
    """True for Google TPU names (`tpu-v4-8`, `tpu-v5litepod-16`)."""
    return canonical_name(name).startswith("tpu-")


def memory_gib(name: str) -> float | None:
    """GiB of memory on one card of this accelerator, when we know it."""
    return _MEMORY_GIB.get(canonical_name(name))
