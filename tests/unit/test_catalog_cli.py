"""`skyless gpus` and `skyless catalog import | show`, through typer's CliRunner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli import catalog_commands
from shared.catalog.model import reset_default_catalog

LAMBDA_HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"

runner = CliRunner()


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[typer.Typer]:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path / "home"))
    reset_default_catalog()
    app = typer.Typer()
    catalog_commands.register(app)
    yield app
    reset_default_catalog()


def _lambda_folder(tmp_path: Path, lines: list[str]) -> Path:
    folder = tmp_path / "skypilot"
    (folder / "lambda").mkdir(parents=True)
    (folder / "lambda" / "vms.csv").write_text("\n".join([LAMBDA_HEADER, *lines]) + "\n")
    return folder


def test_gpus_lists_each_accelerator_per_cloud_with_cheapest_prices(app: typer.Typer) -> None:
    result = runner.invoke(app, ["gpus", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    h100 = {r["cloud"]: r for r in rows if r["accelerator"] == "H100"}
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= set(h100)
    assert h100["aws"]["counts"] == [8.0]
    assert h100["aws"]["cheapest_on_demand"]["instance_type"] == "p5.48xlarge"
    assert h100["aws"]["cheapest_spot"]["hourly_price"] < h100["aws"]["cheapest_on_demand"]["hourly_price"]
    assert h100["lambda"]["cheapest_spot"] is None


def test_gpus_table_names_accelerators_and_clouds(app: typer.Typer) -> None:
    result = runner.invoke(app, ["gpus", "--cloud", "AWS"])
    assert result.exit_code == 0, result.output
    assert "A10G" in result.stdout and "aws" in result.stdout
    assert "runpod" not in result.stdout


def test_gpus_with_a_name_and_count_lists_instance_types_by_region(app: typer.Typer) -> None:
    result = runner.invoke(app, ["gpus", "a100:8", "--cloud", "aws", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["instance_type"] for r in rows} == {"p4d.24xlarge"}
    assert {r["count"] for r in rows} == {8.0}
    assert "us-east-1" in {r["region"] for r in rows}
    us_east = next(r for r in rows if r["region"] == "us-east-1")
    assert us_east["zones"] and all(z.startswith("us-east-1") for z in us_east["zones"])
    prices = [r["hourly_price"] for r in rows]
    assert prices == sorted(prices)

    table = runner.invoke(app, ["gpus", "H100-80GB"])
    assert table.exit_code == 0
    assert "p5.48xlarge" in table.stdout and "a3-highgpu-8g" in table.stdout


def test_gpus_with_an_unknown_name_or_count_says_what_exists(app: typer.Typer) -> None:
    result = runner.invoke(app, ["gpus", "H100:3"])
    assert result.exit_code == 2
    assert "no offering of H100:3" in result.stderr and "1, 2, 4, 8" in result.stderr

    result = runner.invoke(app, ["gpus", "nosuchgpu"])
    assert result.exit_code == 2 and "NOSUCHGPU" in result.stderr

    result = runner.invoke(app, ["gpus", "A100:lots"])
    assert result.exit_code == 2 and "positive number" in result.stderr


def test_gpus_with_an_unknown_cloud_lists_the_clouds(app: typer.Typer) -> None:
    result = runner.invoke(app, ["gpus", "--cloud", "nowhere"])
    assert result.exit_code == 2
    assert "--cloud" in result.stderr and "aws" in result.stderr


def test_catalog_import_makes_later_lookups_use_the_imported_cloud(app: typer.Typer, tmp_path: Path) -> None:
    folder = _lambda_folder(
        tmp_path,
        [
            "gpu_1x_h100_pcie,H100,1.0,26.0,200.0,1.11,us-east-3,,",
            "cpu_4x_generalx,,,4.0,16.0,0.2,us-east-3,,",
        ],
    )
    result = runner.invoke(app, ["catalog", "import", str(folder)])
    assert result.exit_code == 0, result.output
    assert "imported 2 lambda offerings" in result.stdout
    assert (tmp_path / "home" / "catalog" / "lambda.csv").is_file()

    rows = json.loads(runner.invoke(app, ["gpus", "h100", "--cloud", "lambda", "--json"]).stdout)
    assert [(r["instance_type"], r["region"], r["hourly_price"]) for r in rows] == [
        ("gpu_1x_h100_pcie", "us-east-3", 1.11)
    ]

    shown = json.loads(runner.invoke(app, ["catalog", "show", "--json"]).stdout)
    clouds = {c["cloud"]: c for c in shown["clouds"]}
    assert clouds["lambda"]["rows"] == 2
    assert clouds["lambda"]["imported_from"] == str(folder.resolve())
    assert clouds["lambda"]["source"].startswith("imported")
    assert clouds["aws"]["source"] == "built-in"
    assert shown["rows"] == sum(c["rows"] for c in shown["clouds"])


def test_catalog_import_of_a_bad_file_names_file_and_line_and_changes_nothing(
    app: typer.Typer, tmp_path: Path
) -> None:
    folder = _lambda_folder(
        tmp_path, ["gpu_1x_a10,A10,1,30,200,0.75,us-east-1,,", "gpu_1x_a10,A10,1,30,200,?,x,,"]
    )
    result = runner.invoke(app, ["catalog", "import", str(folder)])
    assert result.exit_code == 2
    assert f"{folder / 'lambda' / 'vms.csv'}:3" in result.stderr.replace("\n", "")
    assert not (tmp_path / "home" / "catalog").exists()


def test_catalog_show_reports_the_builtin_catalog_when_nothing_is_imported(app: typer.Typer) -> None:
    result = runner.invoke(app, ["catalog", "show"])
    assert result.exit_code == 0, result.output
    assert "built-in" in result.stdout
    for cloud in ("aws", "gcp", "azure", "lambda", "runpod"):
        assert cloud in result.stdout


def test_show_gpus_is_skypilots_name_for_gpus_and_takes_its_all_flag(app: typer.Typer) -> None:
    shown = runner.invoke(app, ["show-gpus", "a100:8", "--cloud", "aws", "--json", "-a"])
    listed = runner.invoke(app, ["gpus", "a100:8", "--cloud", "aws", "--json"])
    assert shown.exit_code == 0 and listed.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == json.loads(listed.stdout) != []
