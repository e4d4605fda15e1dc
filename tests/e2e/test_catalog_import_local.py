"""`skyless catalog import` as a new user runs it, at the installed entry point on a fresh HOME with the local
runtime already running (and its catalog already warm): the import shows its progress, and right after it
`plan` and `launch --dryrun` (the runtime's own plan) choose the same place at the same price, with no
restart."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_runtime.moto_endpoint import free_port

SKYLESS = Path(sys.executable).with_name("skyless")
LAMBDA_HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    values = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_"))}
    values.update(HOME=str(tmp_path), SKYLESS_LOCAL_MOTO_PORT=str(free_port()),
                  SKYLESS_LOCAL_API_PORT=str(free_port()), COLUMNS="200")  # fmt: skip
    yield values
    subprocess.run([str(SKYLESS), "local", "down"], env=values, capture_output=True, timeout=120, check=False)


def skyless(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(SKYLESS), *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"skyless {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_plan_and_the_running_runtime_agree_right_after_an_import(
    env: dict[str, str], tmp_path: Path
) -> None:
    task = tmp_path / "task.yaml"
    task.write_text("resources:\n  accelerators: H100\n  infra: lambda\nrun: nvidia-smi\n")
    before = skyless(env, "launch", "--dryrun", str(task))  # starts the runtime; its catalog is now warm
    assert "gpu_1x_h100_cheap" not in before

    folder = tmp_path / "skypilot"
    (folder / "lambda").mkdir(parents=True)
    row = "gpu_1x_h100_cheap,H100,1.0,26.0,200.0,0.05,us-east-3,,"
    (folder / "lambda" / "vms.csv").write_text(f"{LAMBDA_HEADER}\n{row}\n")
    imported = skyless(env, "catalog", "import", str(folder))
    assert "[1/1] reading lambda/vms.csv" in imported and "writing 1 offerings" in imported  # progress
    assert "no restart needed" in imported

    planned = skyless(env, "plan", str(task))
    launched = skyless(env, "launch", "--dryrun", str(task))
    for said in (planned, launched):
        assert "gpu_1x_h100_cheap" in said and "us-east-3" in said and "0.05" in said, said
