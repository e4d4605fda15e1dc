"""Which providers can run a task inside its container (`image_id: docker:<image>`), and how.

On a VM (aws, gcp, azure, lambda) the node agent starts the container with the image's docker (user-data
installs docker.io where the machine image has none) and runs `setup` and `run` in it. RunPod runs the image
as the pod itself, so there the agent already is inside it; a private registry would need RunPod's own
registry credentials, which skyless does not create yet. The local cloud needs docker or podman that works on
this machine: a docker client without its daemon does not count.
"""

from __future__ import annotations

import subprocess
from functools import cache

RUNTIMES = ("docker", "podman")
HOST_RUNTIME_PROVIDERS = frozenset({"aws", "gcp", "azure", "lambda"})  # the agent runs docker on the VM
IMAGE_IS_NODE_PROVIDERS = frozenset({"runpod"})  # the provider boots the image itself
LABEL_CLUSTER = "skyless-cluster"  # the agent labels each container with its cluster (node_agent/agent.py)


def is_container_image(image_id: str | None) -> bool:
    return bool(image_id) and str(image_id).startswith("docker:")


def working_runtime() -> str | None:
    """docker, else podman: the first whose `info` answers on this machine (None: neither)."""
    for name in RUNTIMES:
        try:
            if subprocess.run([name, "info"], capture_output=True, timeout=60).returncode == 0:
                return name
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


@cache
def local_runtime() -> str | None:
    """working_runtime(), asked once per process (each ask starts a program)."""
    return working_runtime()


def container_problem(provider: str, *, private_registry: bool) -> str | None:
    """Why `provider` cannot run a task in its container, or None when it can."""
    if provider in HOST_RUNTIME_PROVIDERS:
        return None
    if provider in IMAGE_IS_NODE_PROVIDERS:
        if private_registry:
            return (
                f"the {provider} provider runs the image as the pod and skyless does not register "
                "SKYPILOT_DOCKER_* credentials with it yet, so it cannot pull from a private registry"
            )
        return None
    if provider == "local":
        if local_runtime() is None:
            return "the local cloud runs containers with docker or podman, and neither works on this machine"
        return None
    return f"the {provider} provider cannot run containers"


def run_options_problem(provider: str) -> str | None:
    """Why `provider` cannot start a task's container with `docker run` options of its own, or None."""
    if provider in IMAGE_IS_NODE_PROVIDERS:
        return f"the {provider} provider runs the image as the pod: skyless runs no `docker run` there"
    return None


def remove_cluster_containers(cluster_id: str) -> None:
    """Remove what is left of a local cluster's containers (an agent killed before it removed its own)."""
    runtime = local_runtime()
    if runtime is None or not cluster_id:
        return
    try:
        listed = subprocess.run(
            [runtime, "ps", "-aq", "--filter", f"label={LABEL_CLUSTER}={cluster_id}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        ids = listed.stdout.split()
        if ids:
            subprocess.run([runtime, "rm", "-f", *ids], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return
