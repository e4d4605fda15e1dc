"""The fast SkyPilot catalog import gives what the import gave before it was made fast.

The fast path splits well-formed files with `str.split` and reads each distinct number once; anything
else goes through csv.reader. Both are compared with the import as it was (skypilot_import_before_speedup):
on the real catalog folder in ../shared/catalog, read in place, and on generated files full of the
things CSV makes hard (quotes, commas and line breaks inside cells, CRLF, blank lines, ragged rows).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import skypilot_import_before_speedup as before
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.catalog.skypilot_import import _csv_table, _split_plain, _Table, import_skypilot_catalog
from shared.errors import CatalogError

REAL = Path(__file__).resolve().parents[3] / "shared" / "catalog" / "skypilot" / "v8"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/catalog is not on this machine")

GCP_HEADER = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,"
    "Region,AvailabilityZone,Price,SpotPrice"
)
AZURE_HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Generation"
)


@needs_real
def test_the_real_folder_imports_to_exactly_what_it_did_before() -> None:
    fast = import_skypilot_catalog(REAL)
    assert len(fast) > 80_000
    assert fast == before.import_skypilot_catalog(REAL)  # same offerings, same order, same values
    assert [type(v) for v in fast[0]] == [type(v) for v in before.import_skypilot_catalog(REAL)[0]]


@needs_real
def test_every_real_file_takes_the_fast_path_and_splits_as_csv_does() -> None:
    for path in sorted(REAL.glob("*/vms.csv")):
        fast = _split_plain(path)
        assert fast is not None, path  # the speed the benchmark shows is this path's
        assert _cells(fast) == _cells(_csv_table(path)), path


def _cells(table: _Table) -> list[tuple[str, ...]]:
    """Each row's cells as the import reads them: its shape's, then price, spot price, region and zone."""
    return [(*table.shape_cells(key), *rest) for key, *rest in table.rows()]


def _write(folder: Path, cloud: str, text: str) -> Path:
    (folder / cloud).mkdir(parents=True, exist_ok=True)
    path = folder / cloud / "vms.csv"
    path.write_bytes(text.encode())
    return path


def _outcome(import_folder: object, folder: Path) -> object:
    try:
        return import_folder(folder)  # type: ignore[operator]
    except CatalogError as exc:
        return ("error", exc.file, exc.line, exc.field)


def test_quoted_cells_with_commas_line_breaks_and_crlf_read_as_csv_reads_them(tmp_path: Path) -> None:
    text = (
        AZURE_HEADER + "\r\n"
        'Standard_B2,,,2,8,,0.1,0.02,"Denmark, DK, EU","V1,V2"\r\n'
        "Standard_NC6,K80,1,6,56,\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 12288}}]}\","
        '0.9,,eastus,"V1,V3"\r\n'
        '"Standard_D2",,,2,8,"",0.2,0,westus,V2'
    )
    path = _write(tmp_path, "azure", text)
    assert _split_plain(path) is not None
    fast = import_skypilot_catalog(tmp_path)
    assert fast == before.import_skypilot_catalog(tmp_path)
    assert fast[0].region == "Denmark, DK, EU"
    assert (fast[1].accelerator, fast[1].accelerator_memory_gib, fast[1].spot_price) == ("K80", 12.0, None)


@pytest.mark.parametrize(
    "body",
    [
        'Standard_B2,,,2,8,,0.1,0.02,"east""us",V1\n',  # an escaped quote
        'Standard_B2,,,2,8,,0.1,0.02,eastus,"V1\nV2"\n',  # a line break inside a cell
        'Standard_B2,,,2,8,,0.1,0.02,east"us",V1\n',  # a quote inside an unquoted cell
        'Standard_B2,,,2,8,,0.1,0.02,"east"us,V1\n',  # text after a closing quote
        "Standard_B2,,,2,8,,0.1,0.02,eastus,V1\n\nStandard_B4,,,4,16,,0.2,,eastus,V1\n",  # a blank line
        "Standard_B2,,,2,8,,0.1,0.02,east\rus,V1\n",  # a lone carriage return (csv: a line break)
        "Standard_B2,,,2,8,,0.1,0.02,eastus\n",  # a row short of a field
    ],
)
def test_what_only_csv_reads_right_goes_to_csv_and_gives_the_same_outcome(tmp_path: Path, body: str) -> None:
    path = _write(tmp_path, "azure", AZURE_HEADER + "\n" + body)
    assert _split_plain(path) is None
    assert _outcome(import_skypilot_catalog, tmp_path) == _outcome(before.import_skypilot_catalog, tmp_path)


@pytest.mark.parametrize(
    ("row", "line", "field"),
    [
        ("n1-standard-4,-4,15,,,,us-central1,us-central1-a,0.19,0.04", 3, "vCPUs"),
        ("n1-standard-4,4,15,,,,us-central1,us-central1-a,nan,0.04", 3, "Price"),
        (",,,T4,x,,us-central1,us-central1-a,0.35,0.14", 3, "AcceleratorCount"),
        ("n1-standard-4,4,15,,,,us-central1,us-central1-a,0.19,-1", 3, "SpotPrice"),
    ],
)
def test_a_bad_number_on_the_fast_path_names_its_line_and_column(
    tmp_path: Path, row: str, line: int, field: str
) -> None:
    _write(
        tmp_path, "gcp", f"{GCP_HEADER}\nn1-standard-2,2,7.5,,,,us-central1,us-central1-a,0.09,0.02\n{row}\n"
    )
    with pytest.raises(CatalogError) as caught:
        import_skypilot_catalog(tmp_path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert _outcome(before.import_skypilot_catalog, tmp_path) == ("error", caught.value.file, line, field)


def test_a_bad_number_in_a_row_the_gcp_import_skips_is_still_ignored(tmp_path: Path) -> None:
    # a row without a price is never read further, before and now
    _write(tmp_path, "gcp", f"{GCP_HEADER}\nn1-standard-2,-2,7.5,,,,us-central1,us-central1-a,,\n")
    assert import_skypilot_catalog(tmp_path) == before.import_skypilot_catalog(tmp_path) == []


PLAUSIBLE = {
    "InstanceType": ["", "n1-standard-4", "n1-highmem-64", "a2-highgpu-1g", "g2-standard-4", "B2", '"B,2"'],
    "AcceleratorName": ["", "", "T4", "A100", "L4", "P100", "tpu-v4-8", "tpu-v5litepod-16", '"T4"'],
    "AcceleratorCount": ["", "1", "2", "4", "8", "0.5"],
    "vCPUs": ["", "4", "12", "64", "1.5"],
    "MemoryGiB": ["", "15", "85", "416", "0.5"],
    "GpuInfo": ["", "\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 16384}}]}\"", "x"],
    "Price": ["", "0", "0.19", "0.35", "12.88", "0.190"],
    "SpotPrice": ["", "0", "0.04", "0.2", "0.14"],
    "Region": ["us-central1", "eastus", '"Denmark, DK, EU"'],
    "AvailabilityZone": ["", "us-central1-a", "us-central1-b"],
    "Generation": ["V1", '"V1,V2"'],
}  # fmt: skip
ODD = ["-1", "x", "nan", " 3 ", "1e400", '""', '"q""q"', '"V1\nV2"', '"x"y', 'a"b']


def _cell(name: str) -> st.SearchStrategy[str]:
    """Mostly a cell SkyPilot writes, now and then one that is odd (bad numbers, tricky quoting)."""
    return st.integers(0, 39).flatmap(lambda i: st.sampled_from(ODD if i == 0 else PLAUSIBLE[name]))


def _row(names: list[str]) -> st.SearchStrategy[list[str]]:
    """A row of cells for these columns; one in 25 a field short or a field long."""
    cells = st.tuples(*map(_cell, names)).map(list)
    return st.tuples(cells, st.integers(0, 24)).map(
        lambda pair: pair[0][:-1] if pair[1] == 0 else pair[0] + ["1"] if pair[1] == 1 else pair[0]
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cloud=st.sampled_from(["gcp", "azure"]),
    order=st.permutations(range(10)),
    dropped=st.sets(st.sampled_from(["GpuInfo", "SpotPrice", "AvailabilityZone", "Generation"])),
    shuffled=st.booleans(),
    data=st.data(),
    line_end=st.sampled_from(["\n", "\r\n"]),
    final_end=st.booleans(),
)
def test_generated_files_import_as_they_did_before(
    tmp_path_factory: pytest.TempPathFactory,
    cloud: str,
    order: list[int],
    dropped: set[str],
    shuffled: bool,
    data: st.DataObject,
    line_end: str,
    final_end: bool,
) -> None:
    names = (GCP_HEADER if cloud == "gcp" else AZURE_HEADER).split(",")
    if shuffled:  # SkyPilot's own files differ in column order: lambda's GpuInfo comes after Region
        names = [names[i] for i in order]
    names = [name for name in names if name not in dropped]
    rows = data.draw(st.lists(_row(names), max_size=8), label="rows")
    folder = tmp_path_factory.mktemp("catalog")
    text = line_end.join([",".join(names), *(",".join(row) for row in rows)]) + (
        line_end if final_end else ""
    )
    path = _write(folder, cloud, text)
    now, then = _outcome(import_skypilot_catalog, folder), _outcome(before.import_skypilot_catalog, folder)
    if '"V1\nV2"' in text and isinstance(now, tuple):
        # a cell spanning lines: errors now give the line the row starts on, before its row number + 1
        now, then = now[:2] + now[3:], then[:2] + then[3:]  # type: ignore[index]
    assert now == then
    fast = _split_plain(path)
    if fast is not None:  # where the fast path takes a file, it splits it as csv does
        assert _cells(fast) == _cells(_csv_table(path))
