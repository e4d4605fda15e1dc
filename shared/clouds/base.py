"""The cloud provider protocol: what a launch asks for (LaunchSpec) and what it gets (Node)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

MANAGED_TAG = "skyless-managed"
JOB_TAG = "skyless-job"
CLUSTER_TAG = "skyless-cluster"
RANK_TAG = "skyless-rank"
ATTEMPT_TAG = "skyless-attempt"


@dataclass(frozen=True)
class LaunchSpec:
    """`attempt_id` is the idempotency key (the client token): the same id never launches twice."""

    job_id: str
    cluster_id: str
    attempt_id: str
    attempt: int
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    use_spot: bool
    num_nodes: int
    agent_env: dict[str, str] = field(default_factory=dict)  # user-data / process environment
    # From the task's resources; providers that cannot honour one ignore it.
    accelerator: str | None = None  # the candidate's GPU/TPU ("T4"); hosts that take them attached need it
    accelerator_count: int = 0
    image_id: str | dict[str, str] | None = None  # one image, or SkyPilot's {region: image} form
    disk_size_gb: int | None = None
    ports: tuple[str, ...] = ()  # "8080" or "10000-10010", as the task lists them
    labels: dict[str, str] = field(default_factory=dict)  # extra tags/labels on every resource
    # Launch into this reservation (AWS capacity reservation/block id, GCP reservation name or path, Azure
    # capacity reservation group id) of this kind (shared.optimizer.contract_terms.RESERVATION_KINDS).
    reservation: str | None = None
    reservation_kind: str | None = None

    def tags(self) -> dict[str, str]:
        return {
            MANAGED_TAG: "true",
            JOB_TAG: self.job_id,
            CLUSTER_TAG: self.cluster_id,
            ATTEMPT_TAG: str(self.attempt),
        }


@dataclass(frozen=True)
class Node:
    instance_id: str
    cluster_id: str
    job_id: str
    ip: str
    state: str  # "running" | "terminated"
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    use_spot: bool
    tags: dict[str, str] = field(default_factory=dict)
    public_ip: str | None = None  # where `ssh` reaches it from outside, when the cloud gives one

    @property
    def attempt(self) -> int | None:
        raw = self.tags.get(ATTEMPT_TAG)
        return int(raw) if raw is not None and raw.isdigit() else None


class CloudProvider(Protocol):
    name: str

    def launch(self, spec: LaunchSpec) -> list[Node]: ...  # idempotent on spec.attempt_id
    def terminate(self, cluster_id: str) -> None: ...  # every node tagged with that cluster
    def describe(self, cluster_id: str) -> list[Node]: ...
    def list_owned(self) -> list[Node]: ...  # everything tagged skyless-managed=true

    # Optional: `list_job(job_id) -> list[Node]`, the nodes tagged with one job (a tag filter). Fencing
    # (shared/jobs/fencing.py) uses it when a provider has it, else filters `list_owned()`.


@runtime_checkable
class StoppableProvider(Protocol):
    """A provider that can stop a cluster's nodes keeping their disks, and start them again (named
    clusters' `stop`/`start`/autostop). Providers without it answer `skyless stop` with a clear refusal."""

    def stop(self, cluster_id: str) -> None: ...  # every node tagged with the cluster; idempotent
    def start(self, cluster_id: str, agent_env: dict[str, str]) -> list[Node]: ...  # idempotent


def ranked(nodes: list[Node]) -> list[Node]:
    """Rank order is launch order: nodes sorted by instance id."""
    return sorted(nodes, key=lambda n: n.instance_id)
