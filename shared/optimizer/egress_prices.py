"""What moving and keeping data costs: egress per GB between places, storage per GB-month. One table.

List prices, first tier, USD, read 2026-11 from:
- AWS: https://aws.amazon.com/ec2/pricing/on-demand/#Data_Transfer and https://aws.amazon.com/s3/pricing/
  (internet egress $0.09/GB for the first 10 TB; between regions $0.02/GB; S3 Standard $0.023/GB-month);
- GCP: https://cloud.google.com/storage/pricing#network-buckets and https://cloud.google.com/vpc/network-pricing
  (premium-tier internet egress $0.12/GB for the first TB; between regions on one continent $0.02/GB, across
  continents $0.05/GB; a multi-region bucket (`us`, `eu`, `asia`) read from a region inside it: free;
  Standard storage $0.020/GB-month);
- Azure: https://azure.microsoft.com/pricing/details/bandwidth/ and
  https://azure.microsoft.com/pricing/details/storage/blobs/ (internet egress $0.087/GB for the first 10 TB;
  between regions in one continent $0.02/GB, across continents $0.05/GB; Hot LRS $0.018/GB-month);
- Cloudflare R2: https://developers.cloudflare.com/r2/pricing/ (egress free; $0.015/GB-month);
- Lambda, RunPod, Vast: no egress charge on their pricing pages; `local` moves nothing.

Reading a bucket from the place it lives costs nothing. Writing into a bucket (ingress) is free on every
store: what a job pays to write checkpoints back is its own cloud's egress to the bucket's place.
"""

from __future__ import annotations

EGRESS_PER_GB: dict[str, float] = {  # out of a cloud, to the internet or another cloud
    "aws": 0.09,
    "gcp": 0.12,
    "azure": 0.087,
    "lambda": 0.0,
    "runpod": 0.0,
    "vast": 0.0,
    "cloudflare": 0.0,
    "local": 0.0,
}
DEFAULT_EGRESS_PER_GB = 0.09  # a cloud missing from the table
INTER_REGION_PER_GB: dict[str, tuple[float, float]] = {  # (same continent, across continents)
    "aws": (0.02, 0.02),
    "gcp": (0.02, 0.05),
    "azure": (0.02, 0.05),
}
STORAGE_PER_GB_MONTH: dict[str, float] = {"s3": 0.023, "gcs": 0.020, "azure": 0.018, "r2": 0.015}
MULTI_REGIONS = {"us", "eu", "asia"}  # GCS multi-region locations
CLOUD_OF_STORE = {"s3": "aws", "gcs": "gcp", "azure": "azure", "r2": "cloudflare"}
_CONTINENTS = (
    ("us", "na"), ("ca", "na"), ("northamerica", "na"), ("mx", "na"), ("eastus", "na"), ("westus", "na"),
    ("centralus", "na"), ("northcentralus", "na"), ("southcentralus", "na"), ("westcentralus", "na"),
    ("canada", "na"), ("eu", "eu"), ("europe", "eu"), ("northeurope", "eu"), ("westeurope", "eu"),
    ("uk", "eu"), ("france", "eu"), ("germany", "eu"), ("sweden", "eu"), ("switzerland", "eu"),
    ("norway", "eu"), ("italy", "eu"), ("poland", "eu"), ("spain", "eu"), ("ap", "asia"), ("asia", "asia"),
    ("japan", "asia"), ("korea", "asia"), ("india", "asia"), ("southeastasia", "asia"),
    ("eastasia", "asia"), ("australia", "oceania"), ("sa", "sa"), ("southamerica", "sa"),
    ("brazil", "sa"), ("me", "me"), ("il", "me"), ("uae", "me"), ("qatar", "me"), ("af", "af"),
    ("southafrica", "af"),
)  # fmt: skip


def continent_of(region: str) -> str:
    """`us-east-1`, `us-central1`, `eastus2` -> "na"; `eu-west-1`, `westeurope` -> "eu"; unknown -> region."""
    name = region.lower()
    head = name.split("-", 1)[0]
    for prefix, continent in _CONTINENTS:
        if head == prefix or (len(prefix) >= 3 and name.startswith(prefix)):
            return continent
    return name


def transfer_per_gb(from_cloud: str, from_region: str | None, to_cloud: str, to_region: str | None) -> float:
    """$/GB to move data from one place to another. A region of None means "somewhere in that cloud":
    nothing within one cloud is charged then (the cloud-level model of chained tasks, as SkyPilot's)."""
    if from_cloud != to_cloud:
        return EGRESS_PER_GB.get(from_cloud, DEFAULT_EGRESS_PER_GB)
    if from_region is None or to_region is None or from_region == to_region:
        return 0.0
    same, across = INTER_REGION_PER_GB.get(from_cloud, (0.0, 0.0))
    if continent_of(from_region) != continent_of(to_region):
        return across
    return 0.0 if MULTI_REGIONS & {from_region, to_region} else same
