"""What the REST providers read from a LaunchSpec beyond its base fields."""

from __future__ import annotations

from shared.clouds.base import LaunchSpec


def image_for(spec: LaunchSpec) -> str | None:
    """The task's `image_id`: one image, or SkyPilot's `{region: image}` form (None when no entry fits)."""
    if isinstance(spec.image_id, dict):
        return spec.image_id.get(spec.region)
    return spec.image_id


def accelerator_of(spec: LaunchSpec) -> tuple[str | None, int]:
    """(name, count) of the candidate's accelerators; (None, 0) for a CPU host."""
    if not spec.accelerator:
        return None, 0
    return spec.accelerator, int(spec.accelerator_count)
