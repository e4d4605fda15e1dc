"""SkyPilot's own verdict on task files, for `benchmarks/verdicts.py`. Runs inside a venv with skypilot
installed (not skyless's), offline, with HOME pointing at a folder whose ~/.sky/catalogs/v8 holds the
catalog to plan with.

Usage: <skypilot venv>/bin/python benchmarks/skypilot_verdict_driver.py --clouds gcp,azure,lambda,vast FILE...
Prints one JSON object per file: {"file", "verdict": planned|infeasible|rejected, "reason"}.

What it does per file is what `sky launch --dryrun FILE` does on a machine where exactly those clouds are
enabled: load the DAG (chain or job group) as the CLI does, `Task.validate` each task (local workdir and
file-mount sources are skipped: they live on the user's machine, not in the file), then the optimizer.
Enabled clouds are faked by replacing `sky.check.get_cached_enabled_clouds_or_refresh`; the network is cut.
What SkyPilot would look up online is answered instead, never guessed into a verdict: a region or zone of a
cloud whose catalog is not in the folder (e.g. `region: us-east-1` on a disabled AWS) is taken as valid,
GCP image tags are taken as valid (images.csv is not in the folder), an image's size as fitting any disk
(the cloud's API would be asked), an instance type of such a cloud as existing, and a Kubernetes context as
present in the kubeconfig with every feature (machine state, not the file's). skyless checks none of these at
plan time either. Any look-up still reaching the network is reported as "unknown", never as a verdict.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any


def _cut_network() -> None:
    import requests

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise requests.exceptions.ConnectionError("offline: skypilot_verdict_driver cuts the network")

    requests.get = refuse  # type: ignore[assignment]
    requests.Session.request = refuse  # type: ignore[method-assign]


def _enable_clouds(names: list[str]) -> None:
    from sky import check as sky_check
    from sky.utils import registry

    clouds = [registry.CLOUD_REGISTRY.from_str(name) for name in names]

    def enabled(*args: Any, **kwargs: Any) -> list[Any]:
        return list(clouds)

    sky_check.get_cached_enabled_clouds_or_refresh = enabled  # type: ignore[assignment]


def _lenient_where_no_catalog(catalog_clouds: set[str]) -> None:
    """SkyPilot checks region names and image tags against catalog files it downloads (a disabled cloud's
    vms.csv, GCP's images.csv). Those files are not in the folder and the network is cut: accept the names
    instead of failing (skyless checks neither), so the verdict rests on the optimizer as it would online."""
    from sky.catalog import common as catalog_common
    from sky.catalog import gcp_catalog

    validate = catalog_common.validate_region_zone_impl

    def validate_where_known(cloud_name: str, df: Any, region: Any, zone: Any) -> Any:
        if cloud_name.lower() not in catalog_clouds:
            return region, zone
        return validate(cloud_name, df, region, zone)

    catalog_common.validate_region_zone_impl = validate_where_known  # type: ignore[assignment]
    gcp_catalog.is_image_tag_valid = lambda tag, region: True  # type: ignore[assignment]
    # Sizing an image asks the cloud's API (credentials, network): taken as fitting any disk.
    from sky.utils import registry

    for cloud in registry.CLOUD_REGISTRY.values():
        kind = type(cloud)
        kind.get_image_size = lambda self, image_id, region: 0.0
        kind.is_image_tag_valid = classmethod(lambda cls, image_tag, region: True)
        if str(cloud).lower() not in catalog_clouds:
            kind.instance_type_exists = lambda self, instance_type: True
    # A Kubernetes context and its nodes' labels are this machine's cluster, not something the file says.
    from sky.clouds import kubernetes

    kubernetes.Kubernetes.validate_region_zone = lambda self, region, zone: (region, zone)
    kubernetes.Kubernetes._unsupported_features_for_resources = classmethod(lambda cls, *a, **k: {})


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def verdict(path: str) -> dict[str, str]:
    from sky import exceptions, optimizer
    from sky.utils import common, dag_utils

    try:
        dag = dag_utils.load_dag_from_yaml(path)
        for task in dag.tasks:
            task.validate(skip_file_mounts=True, skip_workdir=True)
    except Exception as error:
        return {"file": path, "verdict": "rejected", "reason": _first_line(error)}
    try:
        if getattr(dag, "is_job_group", lambda: False)():
            optimizer.Optimizer.optimize_job_group(dag, minimize=common.OptimizeTarget.COST, quiet=True)
        else:
            optimizer.Optimizer.optimize(dag, minimize=common.OptimizeTarget.COST, quiet=True)
    except exceptions.ResourcesUnavailableError as error:
        return {"file": path, "verdict": "infeasible", "reason": _first_line(error)}
    except Exception as error:
        # Anything else the optimizer raises is a refusal of the file's values (e.g. a catalog check).
        return {"file": path, "verdict": "rejected", "reason": "optimizer " + _first_line(error)}
    return {"file": path, "verdict": "planned", "reason": ""}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clouds", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    logging.disable(logging.CRITICAL)
    _cut_network()
    _enable_clouds([c for c in args.clouds.split(",") if c])
    catalogs = os.path.expanduser(os.path.join("~", ".sky", "catalogs", "v8"))
    _lenient_where_no_catalog({name.lower() for name in os.listdir(catalogs)})
    for path in args.files:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            result = verdict(path)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
