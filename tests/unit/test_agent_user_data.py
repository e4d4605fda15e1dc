"""The user-data that starts the agent on a VM: it unpacks the exact agent file and exports its env."""

from __future__ import annotations

import base64
import bz2
import re
import subprocess

from node_agent.user_data import AGENT_SOURCE, render_user_data, strip_for_shipping


def _render(cloud: str = "aws", **extra: str) -> str:
    return render_user_data(api_url="https://api.example.com", job_id="j-1", cluster_id="c-1",
                            boot_token="tok'en; rm -rf /", cloud=cloud, **extra)


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
