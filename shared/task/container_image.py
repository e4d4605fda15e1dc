"""`image_id: docker:<image>`: the container a task's `setup` and `run` run in, as SkyPilot reads it.

SkyPilot logs in to a private registry when the task's envs or secrets hold all three of
`SKYPILOT_DOCKER_USERNAME`, `SKYPILOT_DOCKER_PASSWORD` and `SKYPILOT_DOCKER_SERVER`, and completes a
short image name with the server (`docker:my-image:tag` -> `<server>/my-image:tag`). The password is a
value like any other secret: it reaches the node in the agent's authenticated config, never here.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.task.docker_run_options import RUN_OPTIONS_FIELD, task_run_options

DOCKER_PREFIX = "docker:"
DOCKER_USERNAME = "SKYPILOT_DOCKER_USERNAME"
DOCKER_PASSWORD = "SKYPILOT_DOCKER_PASSWORD"
DOCKER_SERVER = "SKYPILOT_DOCKER_SERVER"
DOCKER_LOGIN_ENVS = (DOCKER_USERNAME, DOCKER_PASSWORD, DOCKER_SERVER)


@dataclass(frozen=True)
class ContainerImage:
    image: str  # what `docker pull` is given, the server prepended when the file names a short image
    registry: str | None  # the server logged in to, when the task gives all three login envs
    username: str | None
    run_options: tuple[str, ...] = ()  # `config.docker.run_options`, as the words `docker run` gets

    def as_config(self) -> dict[str, Any]:
        """What the node agent's config carries (no password: the agent reads it from the task's envs)."""
        config: dict[str, Any] = {"image": self.image, "registry": self.registry, "username": self.username}
        if self.run_options:
            config["run_options"] = list(self.run_options)
        return config


def docker_image_name(image_id: str | Mapping[str, str] | None, region: str | None = None) -> str | None:
    """The image after `docker:` (of `region`'s entry in SkyPilot's `{region: image}` form, or of any
    entry when no region is known yet); None when the task names a machine image or none."""
    if isinstance(image_id, Mapping):
        values = [image_id[region]] if region is not None and region in image_id else list(image_id.values())
        image_id = next((v for v in values if isinstance(v, str) and v.startswith(DOCKER_PREFIX)), None)
    if not isinstance(image_id, str) or not image_id.startswith(DOCKER_PREFIX):
        return None
    return image_id[len(DOCKER_PREFIX) :].strip() or None


def image_id_for(resources: Any, cloud: str | None) -> Any:
    """The `image_id` a node on `cloud` gets: that of an `any_of`/`ordered` alternative pinned to the cloud
    that writes one (`image_id: null` too, as SkyPilot's gpt2 example does for Lambda), else the top
    level's."""
    if cloud is not None:
        for alternative in [*(resources.any_of or ()), *(resources.ordered or ())]:
            if alternative.location()[0] == cloud.lower() and "image_id" in alternative.model_fields_set:
                return alternative.image_id
    return resources.image_id


def names_a_container(task: Mapping[str, Any]) -> bool:
    """Whether a task as its file writes it (a mapping, not yet read) names a container for some node."""
    resources: Mapping[str, Any] = task["resources"] if isinstance(task.get("resources"), Mapping) else {}
    alternatives = [resources]
    for kind in ("any_of", "ordered"):
        alternatives += [alt for alt in resources.get(kind) or [] if isinstance(alt, Mapping)]
    return any(docker_image_name(alternative.get("image_id")) is not None for alternative in alternatives)


def runs_in_a_container(task: Any) -> bool:
    """Whether some node of the task, on some cloud, runs `setup` and `run` in a container."""
    resources = task.resources
    alternatives = [resources, *(resources.any_of or ()), *(resources.ordered or ())]
    return any(docker_image_name(alternative.image_id) is not None for alternative in alternatives)


def container_image(
    task: Any, region: str | None = None, *, cloud: str | None = None, secret_names: Any = ()
) -> ContainerImage | None:
    """The task's container on `cloud` (None when it runs on the machine's own OS). `secret_names`: secrets
    kept apart from the task (the null ones a plan leaves for launch, or those a job keeps in its bucket)."""
    name = docker_image_name(image_id_for(task.resources, cloud), region)
    if name is None:
        return None
    values = {**(task.envs or {}), **(task.secrets or {}), **dict.fromkeys(secret_names, "")}
    # A null secret is still to come (planning before launch); at launch every secret has its value.
    login = bool(values.get(DOCKER_USERNAME) and values.get(DOCKER_SERVER)) and DOCKER_PASSWORD in values
    server = str(values[DOCKER_SERVER]).rstrip("/") if login else None
    if server and not name.startswith(server + "/"):
        name = f"{server}/{name}"
    username = str(values[DOCKER_USERNAME]) if login else None
    return ContainerImage(name, server, username, tuple(task_run_options(task)))


def container_notes(pipeline: Any) -> list[str]:
    """One sentence per task that runs in a container: where its commands run, the registry login and the
    run options."""
    notes = []
    for index, task in enumerate(pipeline.tasks):
        image = container_image(
            task, secret_names=(getattr(pipeline, "deferred_secrets", None) or {}).get(index, ())
        )
        if image is None:
            continue
        details = f", logged in to {image.registry} as {image.username}" if image.registry else ""
        if image.run_options:
            details += f", started with {RUN_OPTIONS_FIELD} {shlex.join(image.run_options)}"
        name = task.name or f"task #{index + 1}"
        notes.append(
            f"{name}: resources.image_id: setup and run run inside the container {image.image} (docker or "
            f"podman on each node{details}); the workdir is /root/sky_workdir there"
        )
    return notes
