"""The boot script a REST-cloud VM runs: node_agent's user-data, with the node's name pinned as its
instance id where the cloud has no metadata service that would tell the agent (Lambda Cloud, RunPod)."""

from __future__ import annotations

import shlex

from node_agent.user_data import render_user_data
from shared.clouds.base import LaunchSpec
from shared.clouds.spec_fields import container_image_for

CLUSTER_AGENT_ENV = ("SKYLESS_AGENT_MODE", "SKYLESS_CLUSTER_KEY")  # a named cluster's agent (shared/clusters)


def startup_script(
    spec: LaunchSpec,
    *,
    pinned_id: str | None = None,
    run_as: str | None = None,
    container: bool | None = None,
) -> str:
    """`container`: make docker usable for the agent (default: when the task runs in a container)."""
    script = render_user_data(
        api_url=spec.agent_env.get("SKYLESS_API_URL", ""),
        job_id=spec.job_id,
        cluster_id=spec.cluster_id,
        boot_token=spec.agent_env.get("SKYLESS_BOOT_TOKEN", ""),
        cloud=spec.cloud,
        run_as=run_as,
        extra_env={k: v for k, v in spec.agent_env.items() if k in CLUSTER_AGENT_ENV},
        container=container_image_for(spec) is not None if container is None else container,
    )
    if pinned_id is None:
        return script
    # The fallback identity asks `hostname`; a shell function answers with the name we gave the node.
    pin = (
        f'hostname() {{ if [ "$#" -eq 0 ]; then echo {shlex.quote(pinned_id)}; '
        'else command hostname "$@"; fi; }\n'
    )
    shebang, _, rest = script.partition("\n")
    return f"{shebang}\n{pin}{rest}"
