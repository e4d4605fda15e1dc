"""The cloud-init user-data that starts the node agent on a VM (issue 5's providers call this)."""

from __future__ import annotations

import ast
import base64
import bz2
import hashlib
import shlex
import sys
from functools import cache
from pathlib import Path

AGENT_PACKAGE = Path(__file__).with_name("agent")
# The agent files as they ship, written when the Lambda bundle is built (infra/lambda_code/Makefile runs
# `python -m node_agent.user_data --prebuild DIR`): parsing, stripping and unparsing the agent costs a cold
# provision function ~0.15 s of CPU. Each file is named for a digest of the sources it was made from, so a
# stale one is never read; without them, each process builds what it needs once.
PREBUILT = Path(__file__).with_name("prebuilt")
PREBUILT_CLOUDS = ("aws", "gcp", "azure", "")
# The agent's modules in the order a VM's one file holds them: each after every module it imports.
AGENT_MODULES = ("api", "logs", "mounts", "buckets", "sandbox", "containers", "runner", "preemption", "node")

# How a VM learns its own instance id and private IP, per cloud (the agent needs both in its env).
_IDENTITY = {
    "aws": (
        "TOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token "
        '-H "X-aws-ec2-metadata-token-ttl-seconds: 300")\n'
        'MD() { curl -s -H "X-aws-ec2-metadata-token: $TOKEN" '
        '"http://169.254.169.254/latest/meta-data/$1"; }\n'
        "INSTANCE_ID=$(MD instance-id)\nNODE_IP=$(MD local-ipv4)\n"
    ),
    "gcp": (
        'MD() { curl -s -H "Metadata-Flavor: Google" '
        '"http://metadata.google.internal/computeMetadata/v1/instance/$1"; }\n'
        "INSTANCE_ID=$(MD name)\nNODE_IP=$(MD network-interfaces/0/ip)\n"
    ),
    "azure": (
        'MD() { curl -s -H "Metadata: true" '
        '"http://169.254.169.254/metadata/instance/$1?api-version=2021-02-01&format=text"; }\n'
        "INSTANCE_ID=$(MD compute/name)\n"
        "NODE_IP=$(MD network/interface/0/ipv4/ipAddress/0/privateIpAddress)\n"
    ),
}
PER_BOOT = 'B=/var/lib/cloud/scripts/per-boot; [ -d $B ] && cp "$0" $B/skyless-agent.sh\n'
_UNPACK = (
    "python3 -c 'import base64,bz2,sys;"
    "sys.stdout.buffer.write(bz2.decompress(base64.b85decode(sys.stdin.read())))'"
)
EC2_USER_DATA_BYTES = 16 * 1024
_FALLBACK_IDENTITY = 'INSTANCE_ID=$(hostname)\nNODE_IP=$(hostname -I | cut -d" " -f1)\n'


# Only the local cloud runs these (its nodes run the agent package, never a bundle): a VM's agent never
# reaches them (`sandboxed` is the local cloud; `--mount-namespace` runs sandbox.py itself).
LOCAL_CLOUD_ONLY = frozenset(
    {"enter_mount_namespace", "namespace_binds", "namespace_command", "mount_namespace_works"}
)


# Each cloud's preemption watcher (node_agent/agent/preemption.py): a VM of another cloud never makes it.
CLOUD_WATCHERS = {
    "AwsSpotWatcher": "aws",
    "GcpPreemptedWatcher": "gcp",
    "AzureScheduledEventsWatcher": "azure",
}


def strip_for_shipping(tree: ast.AST, cloud: str = "") -> ast.AST:
    """The agent's syntax tree without docstrings, annotations, the local cloud's own functions and the
    other clouds' preemption watchers: what a VM of `cloud` runs is unchanged, and it leaves room under
    EC2's 16 KB user-data limit (comments go too, since the tree has none)."""
    if isinstance(tree, ast.Module):
        tree.body = [
            node
            for node in tree.body
            if not (isinstance(node, ast.FunctionDef) and node.name in LOCAL_CLOUD_ONLY)
            and not (isinstance(node, ast.ClassDef) and CLOUD_WATCHERS.get(node.name, cloud) != cloud)
        ]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                del body[0]
                body.extend([] if body else [ast.Pass()])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
            arguments = node.args
            for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                arg.annotation = None
            for rest in (arguments.vararg, arguments.kwarg):
                if rest is not None:
                    rest.annotation = None
    for node in ast.walk(tree):
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                setattr(node, name, [_plain_assignment(v) for v in value])
    return ast.fix_missing_locations(tree)


def _plain_assignment(node: object) -> object:
    if isinstance(node, ast.AnnAssign) and node.value is not None and node.simple:
        return ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)
    return node


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


@cache
def sources_digest() -> str:
    """A digest of what the shipped agent is made from: the agent's modules and this file's rules."""
    digest = hashlib.sha256()
    for path in [*sorted(AGENT_PACKAGE.glob("*.py")), Path(__file__)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def prebuilt_path(name: str, folder: Path | None = None) -> Path:
    return (folder or PREBUILT) / f"{name}-{sources_digest()}.py"


def _prebuilt(name: str) -> str | None:
    try:
        return prebuilt_path(name).read_text()
    except FileNotFoundError:
        return None


@cache
def bundled_agent_source() -> str:
    return _prebuilt("bundled") or build_bundled_agent_source()


def build_bundled_agent_source() -> str:
    """The agent package as one Python file (what /opt/skyless/agent.py is on a VM): each module's body in
    AGENT_MODULES order, without its docstring, its `__future__` import and its imports of the package's
    own modules; every other import once, at the top. The modules share one namespace there, so no two
    of them may define the same top-level name (tests/unit/test_agent_user_data.py checks it)."""
    imports: dict[str, ast.stmt] = {}
    bodies: list[ast.stmt] = []
    for name in AGENT_MODULES:
        tree = ast.parse((AGENT_PACKAGE / f"{name}.py").read_text())
        for node in tree.body[1:] if ast.get_docstring(tree) else tree.body:
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith(("node_agent", "__future__"))
            ):
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                imports.setdefault(ast.unparse(node), node)
            elif not _is_main_guard(node):
                bodies.append(node)
    package = ast.parse((AGENT_PACKAGE / "__init__.py").read_text())
    header = ast.parse(f'"""{ast.get_docstring(package)}"""\nfrom __future__ import annotations\n').body
    ending = ast.parse('if __name__ == "__main__":\n    sys.exit(main())\n').body
    module = ast.Module(body=[*header, *imports.values(), *bodies, *ending], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


@cache
def shipped_agent_source(cloud: str = "") -> str:
    """The bundled agent as it travels in user-data to a VM of `cloud` (see strip_for_shipping)."""
    return _prebuilt(f"shipped-{cloud or 'any'}") or build_shipped_agent_source(cloud)


def build_shipped_agent_source(cloud: str = "") -> str:
    return ast.unparse(strip_for_shipping(ast.parse(bundled_agent_source()), cloud))


def prebuild(folder: Path) -> list[Path]:
    """Write the bundled agent and each cloud's shipped one into `folder` (what was there goes)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.py"):
        old.unlink()
    written = {prebuilt_path("bundled", folder): build_bundled_agent_source()}
    for cloud in PREBUILT_CLOUDS:
        written[prebuilt_path(f"shipped-{cloud or 'any'}", folder)] = build_shipped_agent_source(cloud)
    for path, text in written.items():
        path.write_text(text)
    return list(written)


def render_user_data(
    *,
    api_url: str,
    job_id: str,
    cluster_id: str,
    boot_token: str,
    cloud: str,
    run_as: str | None = None,
    extra_env: dict[str, str] | None = None,
    container: bool = False,
) -> str:
    """A bash user-data script: unpack the agent, learn this VM's id and IP, start the agent detached.

    The only credential in it is the boot token (shared.jobs.tokens): it expires with the boot window and
    buys one config fetch per node, so the script opens nothing once the agent has started.
    The agent file travels bzip2-compressed (a tenth smaller than gzip; python3 unpacks it, so no bzip2
    binary is needed) and base85-encoded (a quarter more bytes where base64 adds a third; its alphabet has
    no quote, backslash or space, so it sits in single quotes), which keeps the script under EC2's 16 KB
    limit; a script that would pass it (a long API URL, a container task) fetches the agent from the API
    instead, as a named cluster's node does.
    The agent runs in its own session (setsid) from the user's home, so ~/sky_workdir is where SkyPilot
    puts it and stopping the agent's process group stops the task with it.

    `extra_env` (SKYLESS_AGENT_MODE=cluster, SKYLESS_CLUSTER_KEY) makes a named cluster's agent: agent.py
    and cluster_agent.py together exceed what user-data holds, so the script downloads both from the API
    (`GET /node-agent/<file>`, public code). Its node may be stopped and started, and cloud-init runs
    user-data once per instance: the script copies itself to cloud-init's per-boot folder, so the agent
    comes back at every boot.
    """
    cluster = (extra_env or {}).get("SKYLESS_AGENT_MODE") == "cluster"
    base = shlex.quote(api_url.rstrip("/") + "/node-agent/")
    fetch = "".join(
        f"curl -fsS --retry 20 --retry-delay 3 {base}{name} -o /opt/skyless/{name}\n"
        for name in (("agent.py", "cluster_agent.py") if cluster else ("agent.py",))
    )
    facts = (api_url, job_id, cluster_id, boot_token, cloud, run_as, extra_env, container)
    if cluster:
        return _boot_script(fetch, *facts)
    packed = base64.b85encode(bz2.compress(shipped_agent_source(cloud).encode(), 9)).decode()
    script = _boot_script(f"printf %s '{packed}' | {_UNPACK} > /opt/skyless/agent.py\n", *facts)
    if len(script.encode()) <= EC2_USER_DATA_BYTES:
        return script
    # The agent no longer fits EC2's user-data beside this script: the VM fetches it, as a cluster node does.
    return _boot_script(fetch, *facts)


def _boot_script(
    unpack: str,
    api_url: str,
    job_id: str,
    cluster_id: str,
    boot_token: str,
    cloud: str,
    run_as: str | None,
    extra_env: dict[str, str] | None,
    container: bool,
) -> str:
    cluster = (extra_env or {}).get("SKYLESS_AGENT_MODE") == "cluster"
    home = f"/home/{run_as}" if run_as else "/root"
    env = {
        "SKYLESS_API_URL": api_url,
        "SKYLESS_JOB_ID": job_id,
        "SKYLESS_CLUSTER_ID": cluster_id,
        "SKYLESS_BOOT_TOKEN": boot_token,
        "SKYLESS_CLOUD": cloud,
        **(extra_env or {}),
    }
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    program = "cluster_agent.py" if cluster else "agent.py"
    launch = f"setsid python3 /opt/skyless/{program} >> /var/log/skyless-agent.log 2>&1 < /dev/null &"
    if run_as:
        launch = (
            f"chown {shlex.quote(run_as)} /var/log/skyless-agent.log\n"
            f"sudo -E -H -u {shlex.quote(run_as)} {launch}"
        )
    return (
        "#!/bin/bash\n"
        "set -eu\n"
        "mkdir -p /opt/skyless\n"
        + unpack
        + _IDENTITY.get(cloud, _FALLBACK_IDENTITY)
        + exports
        + 'export SKYLESS_INSTANCE_ID="$INSTANCE_ID" SKYLESS_NODE_IP="$NODE_IP"\n'
        + "touch /var/log/skyless-agent.log\n"
        + (PER_BOOT if cluster else "")
        + (container_runtime_setup(run_as) if container else "")
        + f"cd {home}\n"
        + launch
        + "\n"
    )


def container_runtime_setup(run_as: str | None) -> str:
    """For a task with `image_id: docker:...`: docker from the distribution when the image has neither
    docker nor podman (the GPU images have docker and NVIDIA's container toolkit), usable by the agent's user.
    A failed install is the agent's to report: it finds no container runtime and fails the job saying so."""
    install = (
        "if ! command -v docker >/dev/null && ! command -v podman >/dev/null; then\n"
        "  (export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq docker.io"
        " && systemctl start docker) >> /var/log/skyless-agent.log 2>&1 || true\nfi\n"
    )
    if run_as:
        install += f"getent group docker >/dev/null && usermod -aG docker {shlex.quote(run_as)} || true\n"
    return install


if __name__ == "__main__":
    if sys.argv[1:2] != ["--prebuild"] or len(sys.argv) != 3:
        sys.exit("usage: python -m node_agent.user_data --prebuild FOLDER")
    for written in prebuild(Path(sys.argv[2])):
        print(written)
