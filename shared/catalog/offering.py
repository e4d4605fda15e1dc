"""One purchasable machine shape in one place at one price: the catalog's row."""

from __future__ import annotations

from typing import NamedTuple


class Offering(NamedTuple):
    """A VM type in a cloud region (and zone, where the cloud has zones) with its prices.

    Prices are USD per hour for the whole VM, accelerators included. `spot_price` is None where
    the cloud has no spot market for it. `zone` is None for clouds priced per region only
    (Azure, Lambda Cloud, RunPod in our catalogs).

    A tuple (immutable, hashable) rather than a dataclass: a catalog holds ~90k of them and
    `Offering._make(row)` builds one in C, which is most of what loading a catalog costs.
    """

    cloud: str  # lower-case: aws, gcp, azure, lambda, runpod, vast
    region: str
    zone: str | None
    instance_type: str
    accelerator: str | None  # canonical name (see shared.catalog.accelerators), None for CPU-only
    accelerator_count: float  # 0 for CPU-only; may be fractional on some clouds
    accelerator_memory_gib: float | None
    vcpus: float
    memory_gib: float
    price: float
    spot_price: float | None

    def hourly_price(self, spot: bool) -> float | None:
        """$/h for one VM of this offering, or None if that market does not exist."""
        return self.spot_price if spot else self.price
