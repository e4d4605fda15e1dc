"""A team's contracts in its plans, on the built-in catalog: free reserved capacity wins over a cheaper list
price elsewhere until live jobs use it up, a negotiated discount wins where it makes a cloud cheapest (and
only there), and each plan says which it used."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.catalog.model import load_default_catalog, reset_default_catalog
from shared.errors import UserError
from shared.optimizer import Block, TeamPrices, contracts_from_config, plan_pipeline
from shared.task import load_pipeline

A100x8 = "resources:\n  accelerators: A100:8\nnum_nodes: 4\nrun: python train.py\n"
RESERVATION = {
    "id": "cr-0a1b",
    "cloud": "aws",
    "zone": "us-east-1a",
    "instance_type": "p4d.24xlarge",
    "count": 8,
}


@pytest.fixture(autouse=True)
def builtin_catalog(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path / "home"))
    reset_default_catalog()
    yield
    reset_default_catalog()


def plan(task: str, config: dict, in_use: dict[str, int] | None = None, blocklist: tuple[Block, ...] = ()):
    prices = TeamPrices(contracts_from_config(config, "config.yaml"), in_use or {})
    return plan_pipeline(load_pipeline(task, filename="t.yaml"), load_default_catalog(), prices=prices,
                         blocklist=blocklist)  # fmt: skip


def test_free_reserved_capacity_beats_a_cheaper_list_price_elsewhere_until_live_jobs_use_it_up() -> None:
    config = {"contracts": {"reservations": [RESERVATION]}}
    at_list = plan_pipeline(load_pipeline(A100x8, filename="t.yaml"), load_default_catalog())
    assert at_list.tasks[0].chosen.cloud == "lambda"  # $10.32/h against AWS's $21.96/h

    reserved = plan(A100x8, config, {"cr-0a1b": 2})
    chosen = reserved.tasks[0].chosen
    assert (chosen.cloud, chosen.zone, chosen.instance_type) == ("aws", "us-east-1a", "p4d.24xlarge")
    assert (
        chosen.reservation == "cr-0a1b"
        and chosen.hourly_price == 0
        and chosen.list_price == pytest.approx(21.96)
    )
    assert reserved.total_cost == 0
    assert any(
        "reserved: 6 of 8 free in cr-0a1b" in n and "$0.00/h, already paid" in n for n in reserved.notes
    )
    twin = reserved.tasks[0].candidates[1]  # the failover when the reservation turns out full: list price
    assert twin.reservation is None and twin.cloud == "lambda"

    used_up = plan(A100x8, config, {"cr-0a1b": 6})
    assert used_up.tasks[0].chosen.cloud == "lambda" and used_up.tasks[0].chosen.reservation is None
    assert used_up.tasks[0].chosen.hourly_price == pytest.approx(10.32)
    assert any(
        "reserved: 2 of 8 free in cr-0a1b" in n and "too few for 4 node(s)" in n for n in used_up.notes
    )


def test_a_reservation_is_not_offered_to_spot_requests_nor_to_a_blocked_zone() -> None:
    config = {"contracts": {"reservations": [RESERVATION]}}
    spot = plan(A100x8.replace("A100:8\n", "A100:8\n  use_spot: true\n"), config)
    assert all(c.reservation is None for c in spot.tasks[0].candidates)
    blocked = plan(A100x8, config, blocklist=(Block(cloud="aws", zone="us-east-1a", reason="full"),))
    assert all(c.reservation is None for c in blocked.tasks[0].candidates)


def test_a_reservation_outside_its_term_is_not_free() -> None:
    from datetime import UTC, datetime

    config = {"contracts": {"reservations": [{**RESERVATION, "start": "2026-01-01", "end": "2026-02-01"}]}}
    contracts = contracts_from_config(config, "config.yaml")
    prices = TeamPrices(contracts, {}, at=datetime(2026, 3, 1, tzinfo=UTC))
    result = plan_pipeline(load_pipeline(A100x8, filename="t.yaml"), load_default_catalog(), prices=prices)
    assert result.tasks[0].chosen.reservation is None


def test_a_negotiated_discount_wins_where_it_makes_the_cloud_cheapest_and_says_so() -> None:
    deep = plan(A100x8, {"contracts": {"discounts": [{"cloud": "aws", "family": "p4d", "on_demand": 60}]}})
    chosen = deep.tasks[0].chosen
    assert chosen.cloud == "aws" and chosen.hourly_price == pytest.approx(21.96 * 0.4)
    assert chosen.list_price == pytest.approx(21.96)
    assert any("negotiated \u221260 % on aws p4d: $8.78/h instead of $21.96/h list" in n for n in deep.notes)

    shallow = plan(A100x8, {"contracts": {"discounts": [{"cloud": "aws", "family": "p4d", "on_demand": 40}]}})
    assert shallow.tasks[0].chosen.cloud == "lambda"  # $13.18/h is still more than $10.32/h
    assert not any("negotiated" in n for n in shallow.notes)


def test_the_most_specific_discount_wins_and_spot_is_discounted_apart() -> None:
    contracts = contracts_from_config(
        {"contracts": {"discounts": [
            {"cloud": "aws", "on_demand": 10, "spot": 5},
            {"cloud": "aws", "region": "us-east-1", "family": "p4d", "on_demand": 30},
        ]}},
        "config.yaml",
    )  # fmt: skip
    assert [
        (d.on_demand, d.spot) if d else None
        for d in (
            contracts.discount_for("aws", "us-east-1", "p4d.24xlarge"),
            contracts.discount_for("aws", "us-west-2", "p4d.24xlarge"),
            contracts.discount_for("aws", "us-west-2", "m6i.large"),
        )
    ] == [(30, 0), (10, 5), (10, 5)]
    assert contracts.discount_for("gcp", "us-central1", "a2-highgpu-8g") is None


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ({"contracts": {"discounts": [{"cloud": "aws", "on_demand": 120}]}},
         "contracts.discounts[0].on_demand", "percent off list"),
        ({"contracts": {"reservations": [{**RESERVATION, "count": 0}]}}, "contracts.reservations[0].count",
         "whole number"),
        ({"contracts": {"reservations": [{k: v for k, v in RESERVATION.items() if k != "zone"}]}},
         "contracts.reservations[0].zone", "zonal"),
        ({"contracts": {"reservations": [{**RESERVATION, "kind": "savings-plan"}]}},
         "contracts.reservations[0].kind", "not a aws reservation kind"),
        ({"contracts": {"reservations": [{**RESERVATION, "cloud": "lambda"}]}},
         "contracts.reservations[0].cloud", "targets reservations on"),
        ({"contracts": {"reservation": []}}, "contracts", "unknown key 'reservation'"),
        ({"aws": {"specific_reservations": ["cr-unknown"]}}, "aws.specific_reservations",
         "not described under contracts.reservations"),
        ({"gcp": {"prioritize_reservations": "yes"}}, "gcp.prioritize_reservations", "true or false"),
    ],
)  # fmt: skip
def test_bad_contracts_name_the_key_and_the_file(config: dict, field: str, words: str) -> None:
    with pytest.raises(UserError) as caught:
        contracts_from_config(config, "/home/u/.sky/config.yaml")
    assert caught.value.field == field and caught.value.file == "/home/u/.sky/config.yaml"
    assert words in caught.value.message


def test_skypilots_specific_reservations_choose_which_declared_reservations_are_used() -> None:
    other = {**RESERVATION, "id": "cr-other", "zone": "us-east-1b"}
    contracts = contracts_from_config(
        {"contracts": {"reservations": [RESERVATION, other]}, "aws": {"specific_reservations": ["cr-other"]}},
        "config.yaml",
    )
    assert [r.id for r in contracts.reservations] == ["cr-other"]


def test_a_task_is_put_only_on_a_reserved_machine_it_would_accept_anyway() -> None:
    config = {"contracts": {"reservations": [RESERVATION]}}  # 8 reserved A100:8 machines
    cpu_task = plan("resources:\n  cpus: 8+\nrun: python etl.py\n", config)
    assert all(c.reservation is None for c in cpu_task.tasks[0].candidates)  # free, but not its machine
    two_gpus = plan("resources:\n  accelerators: A100:2\nrun: python ft.py\n", config)
    assert all(c.reservation is None for c in two_gpus.tasks[0].candidates)  # SkyPilot: A100:2 != A100:8
