"""Which clusters can be stopped (disks kept) and started again, and, when not, what the verbs say.

First the cloud, as SkyPilot says it (the local cloud simulates the cloud a plan names, so it refuses what
that cloud would): Lambda Cloud has no stop at all; spot VMs are reclaimed, not kept, on AWS (one-time
requests), Azure (evicted with Delete), RunPod (interruptible pods) and Lambda. Then skyless's provider:
it stops only where it implements `StoppableProvider` (local, aws, gcp's Compute Engine VMs, azure; not
yet TPU VMs or runpod).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.clouds.base import StoppableProvider

if TYPE_CHECKING:
    from shared.store.cluster_records import NamedClusterModel
    from shared.wiring import Wiring

CLOUD_NAMES = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "lambda": "Lambda Cloud", "runpod": "RunPod"}
CANNOT_STOP = {"lambda": "Lambda Cloud does not support stopping instances"}
STOPS_SPOT = frozenset({"gcp"})  # GCP stops Spot VMs (their disks stay)


def cloud_stop_refusal(cloud: str, use_spot: bool) -> str | None:
    """Why the cloud itself cannot stop this cluster, or None."""
    cloud = cloud.lower()
    if cloud in CANNOT_STOP:
        return CANNOT_STOP[cloud]
    if use_spot and cloud not in STOPS_SPOT:
        return f"stopping spot instances is not supported on {CLOUD_NAMES.get(cloud, cloud)}"
    return None


def stop_refusal(
    cloud: str, use_spot: bool, provider: object, instance_type: str | None = None
) -> str | None:
    """Why `skyless stop` (and autostop without --down) cannot stop this cluster, or None."""
    refusal = cloud_stop_refusal(cloud, use_spot)
    if refusal is not None:
        return refusal
    if cloud.lower() == "gcp":
        from shared.clouds.gcp_tpu import TPU_INSTANCE_TYPE  # the GCP client, only where it is needed

        if instance_type == TPU_INSTANCE_TYPE:
            return "skyless cannot stop and start TPU VMs yet"
    if not isinstance(provider, StoppableProvider):
        name = getattr(provider, "name", "?")
        return f"skyless's {name} provider cannot stop and start VMs yet"
    return None


def cluster_stop_refusal(wiring: Wiring, cluster: NamedClusterModel) -> str | None:
    """`stop_refusal` for a recorded cluster: its cloud, market, provider and instance type."""
    provider = wiring.providers.build(str(cluster.provider))
    return stop_refusal(str(cluster.cloud), bool(cluster.use_spot), provider, cluster.instance_type)


STOP_HINT = "tear it down with `skyless down`, or set autostop with --down"
