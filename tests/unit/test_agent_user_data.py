"""The user-data that starts the agent on a VM: it unpacks the exact agent file and exports its env."""

from __future__ import annotations

import base64
import bz2
import re
import subprocess
import sys
from pathlib import Path

from node_agent.user_data import (
    AGENT_MODULES,
    AGENT_PACKAGE,
    bundled_agent_source,
    render_user_data,
    shipped_agent_source,
    strip_for_shipping,
)


def _render(cloud: str = "aws", **extra: str) -> str:
    return render_user_data(
        api_url="https://api.example.com",
        job_id="j-1",
        cluster_id="c-1",
        boot_token="tok'en; rm -rf /",
        cloud=cloud,
        **extra,
    )


def test_user_data_carries_the_agent_less_only_docstrings_and_annotations_and_fits_ec2_limit():
    import ast

    script = _render()
    packed = re.search(r"printf %s '([^']+)' \| python3", script).group(1)
    shipped = bz2.decompress(base64.b85decode(packed)).decode()
    original = ast.parse(bundled_agent_source())
    assert ast.dump(ast.parse(shipped)) == ast.dump(strip_for_shipping(original, "aws"))
    assert "class AwsSpotWatcher" in shipped and "class GcpPreemptedWatcher" not in shipped
    assert '"""' not in shipped and "-> dict" not in shipped
    ast.parse(shipped, feature_version=(3, 8))
    assert len(script.encode()) < 16 * 1024


def test_bash_unpacks_the_exact_shipped_agent(tmp_path):
    script = _render()
    line = next(line for line in script.splitlines() if line.startswith("printf %s '"))
    unpack = line.replace("/opt/skyless/agent.py", str(tmp_path / "agent.py"))
    subprocess.run(["bash", "-c", unpack], check=True, timeout=60)
    assert (tmp_path / "agent.py").read_text() == shipped_agent_source("aws")


def test_user_data_is_valid_bash_and_quotes_the_token():
    script = _render()
    assert subprocess.run(["bash", "-n"], input=script.encode(), check=False).returncode == 0
    assert "export SKYLESS_BOOT_TOKEN='tok'\"'\"'en; rm -rf /'" in script
    assert "export SKYLESS_CLOUD=aws" in script


def test_user_data_reads_identity_from_each_clouds_metadata_service():
    assert "169.254.169.254/latest/meta-data" in _render("aws")
    assert "metadata.google.internal" in _render("gcp")
    assert "Metadata: true" in _render("azure")
    assert "sudo -E -H -u ubuntu" in _render("aws", run_as="ubuntu")


def test_agent_source_is_python_3_8_syntax_and_stdlib_only():
    import ast
    import sys

    tree = ast.parse(bundled_agent_source(), feature_version=(3, 8))
    for name in AGENT_MODULES:
        ast.parse((AGENT_PACKAGE / f"{name}.py").read_text(), feature_version=(3, 8))
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_a_container_task_gets_docker_made_usable_and_still_fits_ec2s_limit():
    from node_agent.user_data import LOCAL_CLOUD_ONLY, shipped_agent_source

    real = {
        "api_url": "https://abcdefghij.execute-api.us-east-1.amazonaws.com",
        "job_id": "job-123456789012",
        "cluster_id": "job-123456789012-0",
        "boot_token": "boot.0.1234567890." + "a" * 64,
        "cloud": "aws",
    }
    script = render_user_data(**real, run_as="ubuntu", container=True)
    assert "apt-get install -y -qq docker.io" in script and "usermod -aG docker ubuntu" in script
    assert script.index("docker.io") < script.index("setsid python3")  # docker is there before the agent
    assert subprocess.run(["bash", "-n"], input=script.encode(), check=False).returncode == 0
    assert len(script.encode()) < 16 * 1024
    assert "docker" not in render_user_data(**real, run_as="ubuntu")
    shipped = shipped_agent_source()
    assert all(f"def {name}(" not in shipped for name in LOCAL_CLOUD_ONLY)  # a VM never runs them


def test_the_bundle_holds_every_module_of_the_package_and_no_name_twice():
    import ast

    on_disk = {p.stem for p in AGENT_PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert on_disk == set(AGENT_MODULES)  # a new module not in the bundle would be missing on a VM
    seen: dict[str, str] = {}
    for name in AGENT_MODULES:
        tree = ast.parse((AGENT_PACKAGE / f"{name}.py").read_text())
        for node in tree.body:
            targets = (
                [node.name]
                if isinstance(node, ast.FunctionDef | ast.ClassDef)
                else [target.id for target in getattr(node, "targets", []) if isinstance(target, ast.Name)]
            )
            for target in targets:
                assert target not in seen, f"{target} is defined in both {seen[target]} and {name}"
                seen[target] = name


def test_a_vm_runs_the_bundle_and_the_cluster_agent_beside_it_without_the_package(tmp_path):
    import sys
    from pathlib import Path

    (tmp_path / "agent.py").write_text(bundled_agent_source())
    cluster = Path(AGENT_PACKAGE.parent / "cluster_agent.py").read_text()
    (tmp_path / "cluster_agent.py").write_text(cluster)
    env = {"PATH": "/usr/bin:/bin"}  # -I -S: no PYTHONPATH, no site-packages; /opt/skyless holds two files
    bare = [sys.executable, "-I", "-S"]
    run = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True, "timeout": 60}
    done = subprocess.run([*bare, "agent.py"], **run)
    assert done.returncode == 2 and "missing environment: SKYLESS_API_URL" in done.stderr
    check = "import sys; sys.path.insert(0, '.'); import cluster_agent; print(cluster_agent.TaskRunner)"
    done = subprocess.run([*bare, "-c", check], **run)
    assert (done.returncode, done.stdout) == (0, "<class 'agent.TaskRunner'>\n"), done.stderr


def test_a_script_that_would_pass_ec2s_limit_fetches_the_agent_from_the_api_instead() -> None:
    long_url = "https://" + "a" * 1200 + ".execute-api.us-east-1.amazonaws.com/prod"
    facts = {"job_id": "job-123456789012", "cluster_id": "job-123456789012-0", "boot_token": "boot.0.1.x"}
    script = render_user_data(api_url=long_url, **facts, cloud="aws", run_as="ubuntu", container=True)
    assert "base64 -d" not in script and len(script.encode()) < 16 * 1024
    assert f"{long_url}/node-agent/agent.py -o /opt/skyless/agent.py" in script
    assert "cluster_agent.py" not in script and "setsid python3 /opt/skyless/agent.py" in script
    assert subprocess.run(["bash", "-n"], input=script.encode(), check=False).returncode == 0


def test_prebuilt_agent_files_are_what_a_process_builds_and_a_stale_one_is_never_read(tmp_path, monkeypatch):
    """The bundle's build writes the shipped agents (infra/lambda_code/Makefile); a file named for other
    sources (the agent changed since) is ignored, and the agent is built as before."""
    import node_agent.user_data as user_data

    written = subprocess.run(
        [sys.executable, "-m", "node_agent.user_data", "--prebuild", str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(written) == 1 + len(user_data.PREBUILT_CLOUDS)
    monkeypatch.setattr(user_data, "PREBUILT", tmp_path)
    cached = (user_data.shipped_agent_source, user_data.bundled_agent_source)
    try:
        for function in cached:
            function.cache_clear()
        shipped = user_data.prebuilt_path("shipped-aws").read_text()
        assert shipped == user_data.build_shipped_agent_source("aws") == user_data.shipped_agent_source("aws")
        assert user_data.bundled_agent_source() == user_data.build_bundled_agent_source()

        user_data.prebuilt_path("shipped-gcp").write_text("prebuilt = True\n")
        user_data.shipped_agent_source.cache_clear()
        assert user_data.shipped_agent_source("gcp") == "prebuilt = True\n"  # read, not rebuilt
        user_data.shipped_agent_source.cache_clear()
        monkeypatch.setattr(user_data, "sources_digest", lambda: "0" * 20)  # the agent's sources changed
        assert user_data.shipped_agent_source("gcp") == user_data.build_shipped_agent_source("gcp")
    finally:
        for function in cached:
            function.cache_clear()
