"""What the REST providers read from a LaunchSpec beyond its base fields."""

from __future__ import annotations

from shared.clouds.base import LaunchSpec


def image_for(spec: LaunchSpec) -> str | None:
    """The task's `image_id`: one image, or SkyPilot's `{region: image}` form (None when no entry fits)."""
    if isinstance(spec.image_id, dict):
        return spec.image_id.get(spec.region)
    return spec.image_id


def accelerator_of(spec: LaunchSpec) -> tuple[str | None, int]:
    """(name, count) when the spec carries them; LaunchSpec has no such fields yet (see issue 5 report)."""
    name = getattr(spec, "accelerator", None)
    count = getattr(spec, "accelerator_count", 0) or 0
    return (str(name) if name else None), int(count)
