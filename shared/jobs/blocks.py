"""A job's blocklist: places that failed it, stored as JSON on the job."""

from __future__ import annotations

import json

from shared.clouds.errors import CloudAuthError, CloudError, NoCapacityError, QuotaError
from shared.optimizer.plan import Block, Candidate, instance_family_of
from shared.store.models import JobModel

STICKY_REASONS = ("auth",)  # blocks that survive a WAITING round (capacity may come back, credentials won't)


def blocks_of(job: JobModel) -> list[Block]:
    return [Block.from_dict(item) for item in json.loads(job.blocklist or "[]")]


def blocks_json(blocks: list[Block]) -> str:
    unique = list(dict.fromkeys(blocks))
    return json.dumps([b.as_dict() for b in unique], separators=(",", ":"))


def zone_block(candidate: Candidate, reason: str) -> Block:
    return Block(cloud=candidate.cloud, region=candidate.region, zone=candidate.zone, reason=reason)


def region_block(candidate: Candidate, reason: str) -> Block:
    return Block(cloud=candidate.cloud, region=candidate.region, reason=reason)


def family_block(candidate: Candidate, reason: str) -> Block:
    family = instance_family_of(candidate.instance_type)
    return Block(cloud=candidate.cloud, region=candidate.region, instance_family=family, reason=reason)


def cloud_block(candidate: Candidate, reason: str) -> Block:
    return Block(cloud=candidate.cloud, reason=reason)


def block_for(candidate: Candidate, error: CloudError) -> Block:
    """What a refused launch blocks (shared/clouds/errors.py's taxonomy): quota the instance family in that
    region, auth the whole cloud, no capacity the zone. Jobs and named clusters fail over by the same rule."""
    if isinstance(error, QuotaError):
        return family_block(candidate, f"quota: {error.message}")
    if isinstance(error, CloudAuthError):
        return cloud_block(candidate, f"auth: {error.message}")
    assert isinstance(error, NoCapacityError), error
    return zone_block(candidate, f"no capacity: {error.message}")


def is_blocked(candidate: Candidate, blocks: list[Block]) -> bool:
    return any(
        b.covers(candidate.cloud, candidate.region, candidate.zone, candidate.instance_type) for b in blocks
    )


def sticky(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.reason.startswith(STICKY_REASONS)]
