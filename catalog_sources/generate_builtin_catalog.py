"""Write shared/catalog/data/<cloud>.csv from the price tables in catalog_sources/<cloud>.yaml.

Run from the repository root: `.venv/bin/python catalog_sources/generate_builtin_catalog.py`.
See catalog_sources/README.md for what the numbers are.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from shared.catalog.accelerators import canonical_name  # noqa: E402
from shared.catalog.files import offerings_csv_text  # noqa: E402
from shared.catalog.offering import Offering  # noqa: E402

SOURCES = Path(__file__).resolve().parent
OUTPUT = ROOT / "shared" / "catalog" / "data"
CLOUDS = ("aws", "azure", "gcp", "lambda", "runpod")
_TYPE_KEYS = {"gpu", "count", "vcpus", "mem", "price", "spot", "regions"}


def _places(table: dict[str, Any], only: list[str] | None) -> Iterator[tuple[str, str | None, float]]:
    """(region, zone, price factor) for every place an offering is sold."""
    regions = table["regions"]
    for name in only or regions:
        if name not in regions:
            raise ValueError(f"{table['cloud']}: unknown region {name!r}")
        region = regions[name]
        for zone in region.get("zones") or [None]:
            yield name, zone, float(region["factor"])


def _priced(value: float | None, factor: float) -> float | None:
    return None if value is None else round(float(value) * factor, 6)


def _offerings(
    table: dict[str, Any],
    memory: dict[str, float],
    instance_type: str,
    spec: dict[str, Any],
) -> Iterator[Offering]:
    unknown = set(spec) - _TYPE_KEYS
    if unknown:
        raise ValueError(f"{table['cloud']} {instance_type}: unknown keys {sorted(unknown)}")
    gpu = canonical_name(spec["gpu"]) if spec.get("gpu") else None
    for region, zone, factor in _places(table, spec.get("regions")):
        yield Offering(
            cloud=table["cloud"],
            region=region,
            zone=zone,
            instance_type=instance_type,
            accelerator=gpu,
            accelerator_count=float(spec.get("count", 0)) if gpu else 0.0,
            accelerator_memory_gib=float(memory[gpu]) if gpu else None,
            vcpus=float(spec["vcpus"]),
            memory_gib=float(spec["mem"]),
            price=_priced(spec["price"], factor) or 0.0,
            spot_price=_priced(spec.get("spot"), factor),
        )


def _gcp_attached(table: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """N1 host + attached GPUs as one whole-VM spec, priced host + count x GPU."""
    for host_name, gpu, count in table.get("gpu_vms", []):
        host, per_gpu = table["hosts"][host_name], table["attached_gpus"][gpu]
        spot = None
        if host.get("spot") is not None and per_gpu.get("spot") is not None:
            spot = host["spot"] + count * per_gpu["spot"]
        yield (
            host_name,
            {
                "gpu": gpu,
                "count": count,
                "vcpus": host["vcpus"],
                "mem": host["mem"],
                "price": host["price"] + count * per_gpu["price"],
                "spot": spot,
                "regions": per_gpu.get("regions"),
            },
        )


def _runpod_pods(table: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, pod in table.get("per_gpu_pods", {}).items():
        for count in pod["counts"]:
            yield (
                f"{count}x_{name}_SECURE",
                {
                    "gpu": pod["gpu"],
                    "count": count,
                    "vcpus": count * pod["vcpus"],
                    "mem": count * pod["mem"],
                    "price": count * pod["price"],
                    "spot": count * pod["spot"] if pod.get("spot") is not None else None,
                    "regions": pod.get("regions"),
                },
            )


def _tpu_slices(table: dict[str, Any]) -> Iterator[Offering]:
    """GCP TPU VM slices: one offering per slice and zone, priced chips x $/chip-hour."""
    for family, spec in table.get("tpus", {}).items():
        for size, (chips, vcpus, host_gib) in spec["slices"].items():
            for zone in spec["zones"]:
                yield Offering(
                    cloud=table["cloud"],
                    region=zone.rsplit("-", 1)[0],
                    zone=zone,
                    instance_type="TPU-VM",
                    accelerator=canonical_name(f"tpu-{family}-{size}"),
                    accelerator_count=1.0,
                    accelerator_memory_gib=float(chips * spec["hbm"]),
                    vcpus=float(vcpus),
                    memory_gib=float(host_gib),
                    price=round(chips * spec["price"], 6),
                    spot_price=round(chips * spec["spot"], 6),
                )


def cloud_offerings(table: dict[str, Any], memory: dict[str, float]) -> list[Offering]:
    """Every offering one cloud's table describes, in a stable order."""
    specs = [*_gcp_attached(table), *_runpod_pods(table), *table.get("instance_types", {}).items()]
    offerings = [o for name, spec in specs for o in _offerings(table, memory, name, spec)]
    offerings.extend(_tpu_slices(table))
    offerings.sort(
        key=lambda o: (o.region, o.zone or "", o.instance_type, o.accelerator_count, o.accelerator or "")
    )
    return offerings


def render_builtin_catalog(sources: Path = SOURCES) -> dict[str, str]:
    """File name → CSV text of every file in shared/catalog/data."""
    memory_table = yaml.safe_load((sources / "accelerator_memory.yaml").read_text())
    memory = {canonical_name(name): gib for name, gib in memory_table.items()}
    files: dict[str, str] = {}
    for cloud in CLOUDS:
        table = yaml.safe_load((sources / f"{cloud}.yaml").read_text())
        files[f"{cloud}.csv"] = offerings_csv_text(cloud_offerings(table, memory))
    return files


def main() -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for name, text in render_builtin_catalog().items():
        (OUTPUT / name).write_text(text)
        print(f"wrote {OUTPUT / name}: {text.count(chr(10)) - 1} offerings")


if __name__ == "__main__":
    main()
