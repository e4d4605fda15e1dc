"""A task's container (`image_id: docker:<image>`) at submit and on its node.

At submit a task whose container no provider it may run on can honour is refused, naming the field and its
line; it is never accepted to fail at launch. On the node the agent gets the image and the registry to log
in to (the password stays among the task's envs and secrets, which only the agent's config fetch carries).
"""

from __future__ import annotations

from typing import Any

from shared.clouds.containers import IMAGE_IS_NODE_PROVIDERS, container_problem, run_options_problem
from shared.config import Settings
from shared.errors import TaskFileError
from shared.task.container_image import DOCKER_PASSWORD, container_image
from shared.task.docker_run_options import RUN_OPTIONS_FIELD, RUN_OPTIONS_PATH
from shared.task.loader import task_field_line
from shared.wiring import wiring_for

IMAGE_FIELD = ("resources", "image_id")


def check_containers(
    settings: Settings, pipeline: Any, *, filename: str, text: str, clouds: list[str] | None = None
) -> None:
    """TaskFileError for the first task that runs in a container on a provider that cannot run it. The
    providers asked are those serving the clouds the task may be planned on: its own pins, else the
    job's `clouds`, else every cloud some provider serves (failover may reach any of them)."""
    registry = wiring_for(settings).providers
    for index, task in enumerate(pipeline.tasks):
        pinned = {r.cloud for r in task.resource_choice().requests}
        may_use = pinned if None not in pinned else {c.lower() for c in clouds or ()}
        # (cloud, provider): each cloud the task may run on; a `*` provider serves the clouds the task pins
        # and, for an alternative that pins none (None), any cloud
        places = {(c, registry.provider_name(c) or "") for c in may_use} or {
            (cloud, provider)
            for written, provider in registry.mapping.items()
            for cloud in (pinned if written == "*" else {written})
        }
        for cloud, provider in sorted(places, key=lambda place: (place[1], place[0] or "")):
            image = container_image(task, cloud=cloud)
            if image is None:
                continue
            problem = container_problem(provider, private_registry=image.registry is not None)
            if problem:
                raise TaskFileError(
                    f"docker:{image.image} cannot run here: {problem}",
                    file=filename,
                    line=task_field_line(text, index, IMAGE_FIELD),
                    field="resources.image_id",
                    hint="give a machine image, or pin clouds whose provider can run it (resources.cloud)",
                )
            problem = run_options_problem(provider) if image.run_options else None
            if problem:
                raise TaskFileError(
                    f"cannot be applied to docker:{image.image} on {cloud or 'every cloud'}: {problem}",
                    file=filename,
                    line=task_field_line(text, index, RUN_OPTIONS_PATH),
                    field=RUN_OPTIONS_FIELD,
                    hint="drop them, or pin clouds whose provider starts the container (resources.cloud)",
                )


def keep_registry_password_secret(pipeline: Any) -> None:
    """A SKYPILOT_DOCKER_PASSWORD given as an env (`--env`, as SkyPilot's docs show) is kept as a secret:
    in the job's bucket, not in its table record. The node sees the same variable either way."""
    for task in pipeline.tasks:
        if DOCKER_PASSWORD in task.envs:
            task.secrets[DOCKER_PASSWORD] = task.envs.pop(DOCKER_PASSWORD)


def node_container(
    settings: Settings, task: Any, cloud: str, region: str | None, secret_names: Any = ()
) -> dict[str, Any] | None:
    """The agent config's `container`: {image, registry, username, run_options when the task gives some};
    None when the task runs on the machine's own OS, or on a provider that boots the image as the node (the
    agent already runs inside it).
    `secret_names`: the job's secrets, kept in its bucket rather than in the stored task."""
    image = container_image(task, region, cloud=cloud, secret_names=secret_names)
    if image is None:
        return None
    if wiring_for(settings).providers.provider_name(cloud) in IMAGE_IS_NODE_PROVIDERS:
        return None
    return image.as_config()
