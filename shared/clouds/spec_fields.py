"""What the REST providers read from a LaunchSpec beyond its base fields."""

from __future__ import annotations

from shared.clouds.base import LaunchSpec
from shared.clouds.containers import is_container_image


def image_for(spec: LaunchSpec) -> str | None:
    """The machine image the task's `image_id` names: one image, or SkyPilot's `{region: image}` form (None
    when no entry fits, or for a container, `docker:<image>`, which runs on the cloud's default image)."""
    image = spec.image_id.get(spec.region) if isinstance(spec.image_id, dict) else spec.image_id
    return None if image is None or is_container_image(image) else image


def container_image_for(spec: LaunchSpec) -> str | None:
    """The image after `docker:` when the task runs in a container, else None."""
    image = spec.image_id.get(spec.region) if isinstance(spec.image_id, dict) else spec.image_id
    return image.removeprefix("docker:") if image is not None and is_container_image(image) else None


def accelerator_of(spec: LaunchSpec) -> tuple[str | None, int]:
    """(name, count) of the candidate's accelerators; (None, 0) for a CPU host."""
    if not spec.accelerator:
        return None, 0
    return spec.accelerator, int(spec.accelerator_count)
