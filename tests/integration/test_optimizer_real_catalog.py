"""plan_task against a brute-force scan of the real SkyPilot catalog in ../shared/catalog (90k rows), with the
reference and the scenarios of tests/unit/test_optimizer_properties.py. Kept out of the unit tier: the brute
force takes about a minute here."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_optimizer_properties import SHARED_CATALOG, check_against_brute_force, scenarios

from shared.catalog.model import Catalog


@pytest.fixture(scope="module")
def shared_catalog() -> Catalog:
    if not SHARED_CATALOG.is_dir():
        pytest.skip(f"{SHARED_CATALOG} is not here")
    from shared.catalog.skypilot_import import import_skypilot_catalog

    return Catalog(import_skypilot_catalog(SHARED_CATALOG))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plan_task_matches_brute_force_on_the_real_skypilot_catalog(
    shared_catalog: Catalog, data: st.DataObject
) -> None:
    check_against_brute_force(shared_catalog, data.draw(scenarios(shared_catalog.offerings)))
