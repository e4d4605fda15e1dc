"""A LaunchSpec as the provisioner would build it, for provider tests: say the cloud, place and type."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.clouds.base import LaunchSpec

JOB = "job-0123456789ab"
AGENT_ENV = {"SKYLESS_API_URL": "https://api.example", "SKYLESS_BOOT_TOKEN": "tok-123"}


def launch_spec(
    cloud: str,
    region: str,
    *,
    instance_type: str,
    zone: str | None = None,
    num_nodes: int = 1,
    attempt: int = 1,
    **changes: Any,
) -> LaunchSpec:
    cluster = f"{JOB}-{attempt}"
    spec = LaunchSpec(
        job_id=JOB,
        cluster_id=cluster,
        attempt_id=cluster,
        attempt=attempt,
        cloud=cloud,
        region=region,
        zone=zone,
        instance_type=instance_type,
        use_spot=False,
        num_nodes=num_nodes,
        agent_env=dict(AGENT_ENV),
    )
    return replace(spec, **changes)
