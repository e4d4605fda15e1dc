"""The `service:` section (SkyServe) checked as SkyPilot 0.14.1 checks it when it reads a task file.

skyless does not run services (the task runs as one job, and `plan`/`launch` say so), but a file whose
`service:` SkyPilot refuses is refused here too, at the same step and naming the field: SkyPilot's
`get_service_schema` (unknown fields are errors) and the checks of `SkyServiceSpec.__init__` and
`from_yaml_config` (replica counts, readiness path, ports).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator
from pydantic_core import PydanticCustomError

from shared.task.strict_model import SpecModel

Number = StrictInt | StrictFloat
Count = Annotated[StrictInt, Field(ge=0)]
Rate = Annotated[Number, Field(ge=0)]
# sky/serve/load_balancing_policies.py and spot_placer.py: the names registered in 0.14.1.
LOAD_BALANCING_POLICIES = ("round_robin", "least_load", "instance_aware_least_load")
SPOT_PLACERS = ("dynamic_fallback",)


def _service_error(message: str, at: str) -> PydanticCustomError:
    return PydanticCustomError("service", message, {"at": at})


class ReadinessProbe(SpecModel):
    path: str
    initial_delay_seconds: Number | None = None
    timeout_seconds: Number | None = None
    endpoint_probe_interval_seconds: Number | None = None
    consecutive_failure_threshold_timeout: Number | None = None
    post_data: str | dict[str, Any] | None = None
    headers: dict[str, str] | None = None


class LoadBalancer(SpecModel):
    stream_timeout_seconds: Number | None = None


class PoolSpec(SpecModel):
    workers: Count | None = None
    min_workers: Count | None = None
    queue_length_threshold: Annotated[StrictInt, Field(ge=1)] | None = None
    max_workers: Count | None = None
    upscale_delay_seconds: Annotated[Number, Field(ge=0)] | None = None
    downscale_delay_seconds: Annotated[Number, Field(ge=0)] | None = None


class ReplicaPolicy(SpecModel):
    min_replicas: Count
    max_replicas: Count | None = None
    num_overprovision: Count | None = None
    target_qps_per_replica: Rate | dict[str, Rate] | None = None
    dynamic_ondemand_fallback: StrictBool | None = None
    base_ondemand_fallback_replicas: Count | None = None
    spot_placer: str | None = None
    upscale_delay_seconds: Number | None = None
    downscale_delay_seconds: Number | None = None

    @model_validator(mode="after")
    def _replica_counts(self) -> ReplicaPolicy:
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise _service_error("max_replicas must be at least min_replicas", "max_replicas")
        if self.target_qps_per_replica is not None and self.max_replicas is None:
            raise _service_error(
                "max_replicas must be set where target_qps_per_replica is set", "target_qps_per_replica"
            )
        if (
            self.target_qps_per_replica is None
            and self.max_replicas is not None
            and self.max_replicas != self.min_replicas
        ):
            raise _service_error(
                "min_replicas and max_replicas differ but target_qps_per_replica is not set "
                "(SkyServe autoscales only on it)",
                "max_replicas",
            )
        if self.spot_placer is not None and self.spot_placer.lower() not in SPOT_PLACERS:
            raise _service_error(f"expected one of {', '.join(SPOT_PLACERS)}", "spot_placer")
        return self


class Tls(SpecModel):
    keyfile: str
    certfile: str


class ServiceSpec(SpecModel):
    """SkyPilot 0.14.1's `service:` schema; kept as written (it is dumped back unchanged)."""

    readiness_probe: str | ReadinessProbe | None = None
    load_balancer: LoadBalancer | None = None
    pool: PoolSpec | None = None
    replica_policy: ReplicaPolicy | None = None
    ports: StrictInt | None = None
    replicas: StrictInt | None = None
    workers: StrictInt | None = None
    load_balancing_policy: str | None = None
    tls: Tls | None = None

    @model_validator(mode="after")
    def _as_skyserve_reads_it(self) -> ServiceSpec:
        if self.replicas is not None and self.replica_policy is not None:
            raise _service_error("give either replicas or replica_policy, not both", "replicas")
        if self.replicas is not None and self.workers is not None:
            raise _service_error("give either replicas or workers, not both", "workers")
        probe = self.readiness_probe
        path = probe if isinstance(probe, str) else probe.path if probe is not None else "/"
        if not path.startswith("/"):
            raise _service_error(f"the readiness path must start with '/'; found {path!r}", "readiness_probe")
        if isinstance(probe, ReadinessProbe) and isinstance(probe.post_data, str):
            try:
                json.loads(probe.post_data)
            except json.JSONDecodeError:
                raise _service_error("post_data written as text must be JSON", "readiness_probe") from None
        if self.ports is not None and not 1 <= self.ports <= 65535:
            raise _service_error(f"expected a port from 1 to 65535; found {self.ports}", "ports")
        policy = self.load_balancing_policy
        if policy is not None and policy.lower() not in LOAD_BALANCING_POLICIES:
            known = ", ".join(LOAD_BALANCING_POLICIES)
            raise _service_error(f"expected one of {known}", "load_balancing_policy")
        return self
