"""Merge rules, pure: a quote reprices the row with the same place and type, never invents one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.catalog.offering import Offering
from shared.price_refresh.merge import apply_prices, carry_previous_prices, offering_key
from shared.price_refresh.quotes import PriceQuote, ProviderPrices

A = Offering("aws", "us-east-1", "us-east-1a", "m5.large", None, 0, None, 2, 8, 0.096, 0.04)
B = Offering("aws", "us-east-1", "us-east-1b", "m5.large", None, 0, None, 2, 8, 0.096, 0.05)
C = Offering("aws", "us-west-2", "us-west-2a", "m5.large", None, 0, None, 2, 8, 0.096, 0.03)


def prices(*quotes: PriceQuote, described: tuple[Offering, ...] = ()) -> ProviderPrices:
    return ProviderPrices("aws", "test", quotes, described)


def test_a_region_quote_reprices_every_zone_and_a_zone_quote_only_its_zone():
    rows, stats = apply_prices(
        [A, B, C],
        prices(
            PriceQuote("us-east-1", "us-east-1b", "m5.large", spot_price=0.02),
            PriceQuote("us-east-1", None, "m5.large", price=0.1),
        ),
    )
    assert [(o.price, o.spot_price) for o in rows] == [(0.1, 0.04), (0.1, 0.02), (0.096, 0.03)]
    assert (stats.repriced, stats.unmatched, stats.added) == (2, 0, 0)


def test_quotes_for_places_or_types_the_catalog_lacks_add_nothing():
    rows, stats = apply_prices(
        [A],
        prices(
            PriceQuote("us-east-1", "us-east-1c", "m5.large", spot_price=0.01),
            PriceQuote("us-east-1", None, "p5.48xlarge", price=98.0),
            PriceQuote("eu-west-1", None, "m5.large", price=0.1),
        ),
    )
    assert rows == [A] and stats.unmatched == 3 and stats.repriced == 0


def test_zero_or_missing_prices_leave_the_row_as_it_was():
    rows, _ = apply_prices([A], prices(PriceQuote("us-east-1", "us-east-1a", "m5.large", 0.0, None)))
    assert rows == [A]


def test_described_offerings_replace_their_row_and_add_new_ones():
    new_price = Offering("aws", "us-east-1", "us-east-1a", "m5.large", None, 0, None, 2, 8, 0.2, None)
    new_row = Offering("aws", "us-east-1", "us-east-1a", "x9.huge", None, 0, None, 64, 256, 5.0, None)
    rows, stats = apply_prices([A, B], prices(described=(new_price, new_row)))
    assert rows == [new_price, B, new_row] and (stats.repriced, stats.added) == (1, 1)


def test_previous_prices_are_carried_but_hardware_comes_from_the_base():
    previous = Offering("aws", "us-east-1", "us-east-1a", "m5.large", None, 0, None, 99, 99, 0.5, 0.2)
    carried = carry_previous_prices([A, B], [previous])
    assert carried[0] == Offering("aws", "us-east-1", "us-east-1a", "m5.large", None, 0, None, 2, 8, 0.5, 0.2)
    assert carried[1] is B


places = st.tuples(
    st.sampled_from(["r1", "r2"]), st.sampled_from([None, "z1", "z2"]), st.sampled_from(["t1", "t2"])
)
money = st.one_of(st.none(), st.floats(min_value=0, max_value=50))


@given(st.lists(places, unique=True, max_size=8), st.lists(st.tuples(places, money, money), max_size=12))
def test_merge_never_changes_which_rows_exist_or_their_hardware(row_places, quotes):
    rows = [Offering("aws", r, z, t, None, 0, None, 4, 16, 1.0, None) for r, z, t in row_places]
    merged, stats = apply_prices(rows, prices(*(PriceQuote(r, z, t, p, s) for (r, z, t), p, s in quotes)))
    assert [offering_key(o) for o in merged] == [offering_key(o) for o in rows]
    assert all((m.vcpus, m.memory_gib) == (4, 16) and m.price > 0 for m in merged)
    assert stats.rows == len(rows)


N1 = Offering("gcp", "us-central1", "us-central1-a", "n1-standard-8", None, 0, None, 8, 30, 0.38, 0.08)
N1_T4 = Offering("gcp", "us-central1", "us-central1-a", "n1-standard-8", "T4", 1, 16, 8, 30, 0.73, 0.22)


def test_a_host_sold_with_several_accelerators_keeps_one_price_per_accelerator():
    previous = [N1_T4._replace(price=0.7), N1._replace(price=0.3)]
    assert [o.price for o in carry_previous_prices([N1, N1_T4], previous)] == [0.3, 0.7]
    quotes = (
        PriceQuote("us-central1", None, "n1-standard-8", 0.75, gpus=("T4", 1)),
        PriceQuote("us-central1", None, "n1-standard-8", 0.37, gpus=(None, 0)),
    )
    rows, stats = apply_prices([N1, N1_T4], ProviderPrices("gcp", "test", quotes))
    assert [o.price for o in rows] == [0.37, 0.75] and stats.repriced == 2
