"""The price catalog: one `Offering` per (cloud, region, zone, instance type), layered from sources.

`offering` is the row; `model` the indexed `Catalog`, its sources (built-in `data/`, imported folders) and
`load_default_catalog()`; `files` the CSV and compact on-disk forms; `skypilot_import` reads SkyPilot's
catalog folders; `accelerators` canonical accelerator names. Pure: no network.
"""

from shared.catalog.accelerators import canonical_name
from shared.catalog.files import offerings_csv_text, parse_offerings_csv
from shared.catalog.model import (
    Catalog,
    CatalogSource,
    build_catalog,
    default_sources,
    imported_catalog_dir,
    load_default_catalog,
    read_import_manifest,
    save_imported_catalog,
)
from shared.catalog.offering import Offering
from shared.catalog.skypilot_cache import load_skypilot_folder
from shared.catalog.skypilot_import import import_skypilot_catalog

__all__ = [
    "Catalog",
    "CatalogSource",
    "Offering",
    "build_catalog",
    "canonical_name",
    "default_sources",
    "import_skypilot_catalog",
    "imported_catalog_dir",
    "load_default_catalog",
    "load_skypilot_folder",
    "offerings_csv_text",
    "parse_offerings_csv",
    "read_import_manifest",
    "save_imported_catalog",
]
