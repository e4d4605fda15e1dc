"""The user-data that starts the agent on a VM: it unpacks the exact agent file and exports its env."""

from __future__ import annotations

import base64
import bz2
import re
import subprocess

from node_agent.user_data import AGENT_SOURCE, render_user_data, strip_for_shipping


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
    packed = re.search(r"echo (\S+) \| base64 -d", script).group(1)
    shipped = bz2.decompress(base64.b64decode(packed)).decode()
    original = ast.parse(AGENT_SOURCE.read_text())
    assert ast.dump(ast.parse(shipped)) == ast.dump(strip_for_shipping(original))
    assert '"""' not in shipped and "-> dict" not in shipped
    ast.parse(shipped, feature_version=(3, 8))
    assert len(script.encode()) < 16 * 1024


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

    tree = ast.parse(AGENT_SOURCE.read_text(), feature_version=(3, 8))
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
