"""The unzipped size of what `sam build` ships for each Lambda function, and proof that it is enough.

By default it runs what `sam build` runs for a function of infra/template.yaml (BuildMethod: makefile, so
`make build-<Function>` in infra/lambda_code with ARTIFACTS_DIR set; every function has the same CodeUri and
Makefile, so one build stands for all). `--sam PATH` runs the SAM CLI itself instead and measures each
function. Then it builds the same for this machine's platform and imports every handler, and every module
that handlers import lazily (the cloud providers, price sources, notifiers), with nothing else on sys.path.

    .venv/bin/python benchmarks/bundle_size.py            # make, as sam does
    .venv/bin/python benchmarks/bundle_size.py --sam /path/to/sam
Needs `make`, pip and the package index (the build downloads the runtime dependencies).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ROOT / "infra" / "lambda_code"
TARGET_MB = 60.0
NEVER_SHIPPED = (
    "tests",
    "local_runtime",
    "cli",
    "moto",
    "pytest",
    "typer",
    "rich",
    "benchmarks",
    "pip",
    "setuptools",
    "flask",
    "werkzeug",
)
HANDLERS = (
    "functions.submit.app",
    "functions.submit.handler",
    "functions.optimize.handler",
    "functions.provision.handler",
    "functions.spot_watch.handler",
    "functions.reconcile.handler",
    "functions.reaper.handler",
    "functions.notify.handler",
    "functions.catalog_refresh.handler",
)
LAZY = (  # imported inside functions, on the paths a deployed stack can take
    "shared.clouds.aws",
    "shared.clouds.gcp",
    "shared.clouds.azure",
    "shared.clouds.lambda_cloud",
    "shared.clouds.runpod",
    "shared.price_refresh.aws_prices",
    "shared.price_refresh.azure_prices",
    "shared.price_refresh.gcp_prices",
    "shared.price_refresh.lambda_prices",
    "shared.price_refresh.runpod_prices",
    "shared.notifications.slack",
    "shared.notifications.email",
    # imported inside functions by the API and submit (and every module_on_first_use names: see on_first_use)
    "functions.submit.openapi",
    "shared.clusters.agents",
    "shared.jobs.deadlines",
    "shared.schedules.operations",
)


def make_build(artifacts: Path, platform: str | None = None) -> None:
    env = {**os.environ, "ARTIFACTS_DIR": str(artifacts), "PYTHON": sys.executable}
    command = ["make", "-s", "--no-print-directory", "-C", str(CODE), "build-ApiFunction"]
    if platform is not None:
        command.append(f"LAMBDA_PLATFORM={platform}")
    subprocess.run(command, env=env, check=True)


def sam_build(sam: str, build_dir: Path) -> list[Path]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    subprocess.run(
        [
            sam,
            "build",
            "-t",
            str(ROOT / "infra" / "template.yaml"),
            "--build-dir",
            str(build_dir),
            "--parallel",
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return sorted(p for p in build_dir.iterdir() if p.is_dir())


def unzipped_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def zipped_bytes(folder: Path, scratch: Path) -> int:
    archive = scratch / f"{folder.name}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                out.write(path, path.relative_to(folder))
    return archive.stat().st_size


def largest(folder: Path, count: int = 6) -> str:
    sizes = [(unzipped_bytes(p) if p.is_dir() else p.stat().st_size, p.name) for p in folder.iterdir()]
    return ", ".join(f"{name} {size / 1e6:.1f}" for size, name in sorted(sizes, reverse=True)[:count])


def botocore_services() -> list[str]:
    """The AWS services whose models the Makefile keeps in the bundle (the rest of botocore's data goes)."""
    for line in (CODE / "Makefile").read_text().splitlines():
        if line.startswith("BOTOCORE_SERVICES ="):
            return line.split("=", 1)[1].split()
    raise SystemExit("infra/lambda_code/Makefile names no BOTOCORE_SERVICES")


def on_first_use(bundle: Path) -> list[str]:
    """Every module the bundle's code names to functions.submit.lazy_modules.module_on_first_use."""
    found = set()
    for source in (bundle / "functions").rglob("*.py"):
        found.update(re.findall(r'module_on_first_use\("([\w.]+)"\)', source.read_text()))
    return sorted(found)


def import_check(bundle: Path) -> str:
    """Import every handler and lazily imported module with only the bundle (and the standard library), and
    make a client of every AWS service the bundle keeps the model of."""
    lazy = sorted({*LAZY, *on_first_use(bundle)})
    modules = ", ".join(repr(m) for m in (*HANDLERS, *lazy))
    code = (
        "import importlib, os, sys, sysconfig\n"
        f"for name in ({modules}):\n    importlib.import_module(name)\n"
        "import botocore.session\n"
        "session = botocore.session.get_session()\n"
        f"for service in {botocore_services()!r}:\n"
        "    session.create_client(service, region_name='us-east-1')\n"
        "print(len([m for m in sys.modules if '.' not in m]))\n"
        "from importlib.util import cache_from_source\n"
        "files = [getattr(m, '__file__', None) or '' for m in list(sys.modules.values())]\n"
        "print(sum(1 for f in files if f.endswith('.py') and not os.path.exists(cache_from_source(f))))\n"
        "stdlib = (sysconfig.get_paths()['stdlib'], sysconfig.get_paths()['platstdlib'])\n"
        "bundle = os.path.realpath(os.environ['PYTHONPATH']) + os.sep\n"
        "outside = {f for f in map(os.path.realpath, filter(None, files))\n"
        "           if not f.startswith(bundle) and not f.startswith(stdlib)}\n"
        "print(len(outside), *sorted(outside)[:3])\n"
    )
    env = {  # no bytecode written: Lambda's /var/task is read-only, so a cold start uses what ships
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(bundle),
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # -P and a cwd inside the bundle: a source tree in the current folder (`python -c` puts it first on
    # sys.path) would otherwise be imported instead of the bundle, and judged without its bytecode
    done = subprocess.run(
        [sys.executable, "-S", "-P", "-c", code],
        cwd=bundle, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return "FAILED: " + done.stderr.strip().splitlines()[-1]
    top_level, uncompiled, outside = done.stdout.splitlines()
    if not outside.startswith("0"):
        return f"FAILED: modules imported from outside the bundle: {outside}"
    if int(uncompiled):
        return f"FAILED: {uncompiled} imported modules have no bytecode (compiled at every cold start)"
    services = len(botocore_services())
    counts = f"{len(HANDLERS)} handlers, {len(lazy)} lazy modules, {top_level} top-level modules"
    return f"ok ({counts}, all with bytecode; clients of its {services} AWS services)"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sam", help="a SAM CLI to run `sam build` with (default: make, as sam does)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skyless-bundle-") as scratch:
        scratch_dir = Path(scratch)
        if args.sam:
            bundles = sam_build(args.sam, scratch_dir / "sam-build")
            how = f"sam build ({args.sam})"
        else:
            bundles = [scratch_dir / "ApiFunction"]
            make_build(bundles[0])
            how = "make build-<Function> in infra/lambda_code, as sam build runs it (all functions alike)"
        print(f"built with: {how}")
        worst = 0.0
        for bundle in bundles:
            size = unzipped_bytes(bundle) / 1e6
            worst = max(worst, size)
            zipped = zipped_bytes(bundle, scratch_dir) / 1e6
            print(f"{bundle.name:24s} unzipped {size:6.1f} MB   zipped {zipped:5.1f} MB")
        print(f"largest entries (MB): {largest(bundles[0])}")
        shipped = {p.name for p in bundles[0].iterdir()}
        stray = sorted(name for name in NEVER_SHIPPED if name in shipped)
        print(f"test/CLI/local-runtime packages in it: {', '.join(stray) or 'none'}")
        verdict = "met" if worst <= TARGET_MB else "MISSED"
        print(f"target: unzipped <= {TARGET_MB:.0f} MB per function: {verdict} ({worst:.1f} MB)")
        host = scratch_dir / "host-platform"
        make_build(host, platform="")
        imported = import_check(host)
        print(f"imports from the bundle alone (built for this machine): {imported}")
    return 0 if worst <= TARGET_MB and not stray and imported.startswith("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
