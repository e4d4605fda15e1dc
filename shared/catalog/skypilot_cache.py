"""A SkyPilot catalog folder, converted once and kept as compact snapshots (shared.catalog.files).

`skyless plan --catalog DIR` reads the same folder again and again; converting its CSVs (90k rows) is
most of what a plan costs. Each `<cloud>/vms.csv` is converted once into a snapshot under
`$SKYLESS_HOME/catalog-cache/<hash of the folder's path>/<cloud>.compact`, tied to the CSV's size and
mtime: a changed CSV is converted again, an unchanged one is read from its snapshot. A folder the cache
cannot be written to (read-only home) is converted every time, with the same result.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from shared.catalog.files import offerings_from_compact, offerings_to_compact
from shared.catalog.model import skyless_home
from shared.catalog.offering import Offering
from shared.catalog.skypilot_import import import_skypilot_catalog, skypilot_catalog_files


def cache_folder(folder: Path) -> Path:
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    return skyless_home() / "catalog-cache" / digest


def load_skypilot_folder(folder: Path | str) -> list[Offering]:
    """Every offering of a SkyPilot catalog folder, from snapshots where they are current."""
    root = Path(folder)
    files = skypilot_catalog_files(root)
    cache = cache_folder(root)
    offerings: list[Offering] = []
    for path in files:
        cloud = path.parent.name.lower()
        stat = path.stat()
        signature = (stat.st_size, stat.st_mtime_ns)
        snapshot = cache / f"{cloud}.compact"
        cached = _read(snapshot, signature)
        if cached is None:
            cached = import_skypilot_catalog(root, clouds=[cloud])
            _write(snapshot, cached, signature)
        offerings.extend(cached)
    return offerings


def _read(snapshot: Path, signature: tuple[int, int]) -> list[Offering] | None:
    try:
        return offerings_from_compact(snapshot.read_bytes(), signature)
    except OSError:
        return None


def _write(snapshot: Path, offerings: list[Offering], signature: tuple[int, int]) -> None:
    try:
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        partial = snapshot.with_name(snapshot.name + ".partial")
        partial.write_bytes(offerings_to_compact(offerings, signature))
        partial.replace(snapshot)
    except OSError:
        pass  # a read-only home: convert again next time
