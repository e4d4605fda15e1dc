"""Ask a pricing API about each region in parallel; a region that fails is a problem, not a failure,
unless every region fails."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from shared.price_refresh.quotes import PriceQuote, PriceSourceError

MAX_PARALLEL_REGIONS = 8  # I/O bound; enough to keep a 58-region refresh within a Lambda timeout


def quotes_by_region(
    regions: Iterable[str],
    quotes_of: Callable[[str], list[PriceQuote]],
    expected: tuple[type[Exception], ...],
) -> tuple[list[PriceQuote], list[str]]:
    """Every region's quotes, and "<region>: <error>" for each region that raised one of `expected`."""
    ordered = sorted(set(regions))
    if not ordered:
        return [], []

    def one(region: str) -> tuple[list[PriceQuote], str | None]:
        try:
            return quotes_of(region), None
        except expected as error:
            return [], f"{region}: {error}"

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_REGIONS, len(ordered))) as pool:
        answers = list(pool.map(one, ordered))
    quotes = [q for found, _ in answers for q in found]
    problems = [problem for _, problem in answers if problem is not None]
    if len(problems) == len(ordered):
        raise PriceSourceError(f"every region failed, first: {problems[0]}")
    return quotes, problems
