"""What a pricing source answers: prices for places and instance types, never hardware (except where
the API itself describes the machines, as Lambda Cloud's does)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from shared.catalog.offering import Offering


@dataclass(frozen=True, slots=True)
class PriceQuote:
    """A $/h price of one instance type in one place. `zone=None` quotes every zone of the region;
    a None price leaves that market's price as it was. `gpus` narrows the quote to the rows with that
    (accelerator, count) attached, where one host type is sold with several (GCP's N1 hosts); None
    quotes every row of the type, `(None, 0)` only the one without accelerators."""

    region: str
    zone: str | None
    instance_type: str
    price: float | None = None
    spot_price: float | None = None
    gpus: tuple[str | None, float] | None = None


@dataclass(frozen=True)
class ProviderPrices:
    """One provider's answer: quotes for rows the catalog describes, and (only from APIs that describe
    hardware) whole offerings, which may be new rows."""

    cloud: str
    source: str  # what was asked, e.g. "ec2:DescribeSpotPriceHistory + pricing:GetProducts"
    quotes: tuple[PriceQuote, ...] = ()
    described: tuple[Offering, ...] = field(default=())
    problems: tuple[str, ...] = ()  # parts that failed (e.g. one region) while the rest answered


class PriceSourceError(Exception):
    """A pricing API that answered with an error or something we cannot read."""


class PriceFetcher(Protocol):
    """One provider's pricing source. `base` is the catalog's rows of that cloud: what to ask about."""

    @property
    def cloud(self) -> str: ...

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices: ...
