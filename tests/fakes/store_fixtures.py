"""Fixtures that start and stop the stores' emulators (fakes.store_emulators says what each enforces).
Use with `pytest_plugins = ["fakes.store_fixtures"]`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.store_emulators import (
    AZURITE_ACCOUNT,
    FakeGoogleSts,
    _free_port,
    _stop,
    _wait_until_serving,
    azurite_command,
)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Azurite's blob service on a free port: its URL for the development account."""
    command = azurite_command()
    if command is None:
        pytest.skip("Azurite is not installed (.ci/run: npm install --prefix .azurite azurite)")
    folder = tmp_path_factory.mktemp("azurite")
    port = _free_port()
    log = folder / "azurite.log"
    args = [command, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder),
            "--disableTelemetry", "--skipApiVersionCheck", "--silent"]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
    try:
        _wait_until_serving(url + "?comp=list", process, log)
        yield url
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gcp-storage-emulator (in memory) on a free port: its URL."""
    command = Path(sys.executable).with_name("gcp-storage-emulator")
    if not command.exists():
        pytest.skip("gcp-storage-emulator is not installed (it is in the dev extra)")
    folder = tmp_path_factory.mktemp("gcs-emulator")
    port = _free_port()
    log = folder / "emulator.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(command), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(url + "/storage/v1/b?project=p", process, log)
        yield url
    finally:
        _stop(process)


@pytest.fixture
def google_sts() -> Iterator[FakeGoogleSts]:
    sts = FakeGoogleSts(source_token="control-plane-token")
    sts.server.start()
    try:
        yield sts
    finally:
        sts.server.stop()
