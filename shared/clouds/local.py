"""The `local` cloud: each node is an agent process on this machine, in its own sandbox folder.

Every fact about a node lives in `$SKYLESS_HOME/local/nodes/<cluster>/<rank>/node.json`, so any process
(dispatcher, CLI, tests, the reconcile sweep) can find, describe and terminate nodes by tag, as it
would on a real cloud. The plan still names the real cloud, region and instance type being simulated.
Capacity is configurable so that failover happens for real: `$SKYLESS_HOME/local/capacity.json` (or the
JSON in `SKYLESS_LOCAL_CAPACITY`) lists places with no capacity, no quota, refused credentials...
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.clouds.base import CLUSTER_TAG, JOB_TAG, RANK_TAG, LaunchSpec, Node
from shared.clouds.containers import is_container_image, remove_cluster_containers
from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.config.clouds import LocalCloudConfig
from shared.config.env_names import ENV_PYTHONPATH
from shared.config.environment import inherited_environ

NODE_FILE = "node.json"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
AGENT_COMMAND = [sys.executable, "-m", "node_agent.agent"]
CLUSTER_AGENT_COMMAND = [sys.executable, "-m", "node_agent.cluster_agent"]  # a named cluster's nodes
SHELL_PASSTHROUGH = ("PATH", "TERM", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "COLORTERM")
PREEMPTION_NOTICE_SECONDS = 2.0  # between a spot node's notice and its end (AWS gives two minutes)
FAULTS = {
    "no_capacity": NoCapacityError,
    "quota": QuotaError,
    "auth": CloudAuthError,
    "transient": TransientCloudError,
    "invalid": InvalidLaunchError,
}
SPOT_ONLY_FAULT = "no_spot_capacity"  # like no_capacity, for spot launches only


def _place(cloud: str, region: str, zone: str | None) -> str:
    return "/".join(p for p in (cloud, region, zone) if p)


def _matches(pattern: str, place: str) -> bool:
    """`aws/us-east-1` covers its zones; `gcp/*` covers a cloud; `*` everything."""
    return fnmatch.fnmatchcase(place, pattern) or place.startswith(pattern.rstrip("/") + "/")


def _process_start_ticks(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time), or None when the pid is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _descendants(pid: int) -> list[int]:
    """Every live process below `pid` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _session_pids(sandbox: Path) -> list[int]:
    """Shells registered on a node (`<home>/.skyless/sessions/<pid>`)."""
    folder = sandbox / ".skyless" / "sessions"
    return [int(p.name) for p in folder.glob("*") if p.name.isdigit()] if folder.is_dir() else []


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


class LocalCloud:
    """The provider. `home` is $SKYLESS_HOME; `api_url` is where the agents report."""

    name = "local"

    def __init__(
        self,
        home: Path,
        api_url: str | None = None,
        agent_command: list[str] | None = None,
        config: LocalCloudConfig | None = None,
    ) -> None:
        self.root = home / "local"
        self.nodes_dir = self.root / "nodes"
        self.api_url = api_url
        self.config = config  # None: read from the environment when used (tests change it between calls)
        override = (config or LocalCloudConfig.from_env()).agent_command  # tests use a stand-in
        self.agent_command = agent_command or (list(override) if override else AGENT_COMMAND)

    # -- capacity --------------------------------------------------------------------------

    def capacity_rules(self) -> dict[str, list[str]]:
        raw = (self.config or LocalCloudConfig.from_env()).capacity
        if not raw:
            path = self.root / "capacity.json"
            raw = path.read_text() if path.exists() else "{}"
        rules = json.loads(raw or "{}")
        return {kind: list(rules.get(kind, [])) for kind in (*FAULTS, SPOT_ONLY_FAULT)}

    def set_capacity_rules(self, rules: dict[str, list[str]]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "capacity.json").write_text(json.dumps(rules, indent=2))

    def _check_capacity(self, spec: LaunchSpec) -> None:
        place = _place(spec.cloud, spec.region, spec.zone)
        for kind, patterns in self.capacity_rules().items():
            if kind == SPOT_ONLY_FAULT and not spec.use_spot:
                continue  # spot capacity is gone there; on-demand still has room
            for pattern in patterns:
                if _matches(pattern, place):
                    error = FAULTS.get(kind, NoCapacityError)
                    raise error(f"local cloud: {kind.replace('_', ' ')} in {place} (rule {pattern!r})")

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        # Two deliveries of one launch may run at once (two dispatcher threads, two Lambdas): one at a time
        # per cluster, and the second finds what the first started.
        self.nodes_dir.mkdir(parents=True, exist_ok=True)
        with open(self.nodes_dir / f".{spec.cluster_id}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._launch_locked(spec)

    def _launch_locked(self, spec: LaunchSpec) -> list[Node]:
        existing = self._read_cluster(spec.cluster_id)
        if existing and all(r.get("attempt_id") == spec.attempt_id for r in existing):
            return [self._node(r) for r in existing]  # the same attempt again: what it launched
        if existing:
            raise InvalidLaunchError(f"cluster {spec.cluster_id} exists from another launch attempt")
        self._check_capacity(spec)
        if self.api_url is None:
            raise InvalidLaunchError("local cloud: no API URL for the node agents (SKYLESS_API_URL)")
        return [self._start_node(spec, rank) for rank in range(spec.num_nodes)]

    def terminate(self, cluster_id: str) -> None:
        records = self._read_cluster(cluster_id)
        for record in records:
            self._stop(record, new_state="terminated")
        if any(_runs_containers(r) for r in records):
            remove_cluster_containers(cluster_id)  # a VM's containers go with it; a local node's do not

    def describe(self, cluster_id: str) -> list[Node]:
        return [self._node(r) for r in self._read_cluster(cluster_id)]

    def list_owned(self) -> list[Node]:
        if not self.nodes_dir.exists():
            return []
        paths = sorted(self.nodes_dir.glob(f"*/*/{NODE_FILE}"))
        return [self._node(r) for path in paths if (r := _load(path))]

    def list_job(self, job_id: str) -> list[Node]:
        """The nodes tagged with `job_id` (a cloud's tag filter; cluster folders are `<job id>-<attempt>`)."""
        if not job_id or "/" in job_id or not self.nodes_dir.exists():
            return []
        paths = sorted(self.nodes_dir.glob(f"{glob.escape(job_id)}-*/*/{NODE_FILE}"))
        return [self._node(r) for path in paths if (r := _load(path)) and r.get("job_id") == job_id]

    # -- what only a simulated cloud can do ------------------------------------------------

    def preempt(
        self, target: str, rank: int = 0, notice_seconds: float = PREEMPTION_NOTICE_SECONDS
    ) -> dict[str, Any] | None:
        """Reclaim one node of a cluster (or of a job's live cluster) as a cloud reclaims a spot VM.

        A notice first (SIGTERM to the node's agent, which reports `preempting` and passes it to the task so
        it can checkpoint), then the kill when the notice period ends or the node has shut down, whichever
        is sooner: AWS's two-minute warning, shortened. Returns the EventBridge event to deliver (source
        `skyless.local`, the AWS spot-warning shape), or None when there is no live node to preempt.
        """
        records = self._read_cluster(target) or self._live_records_of_job(target)
        for record in records:
            if record["rank"] == rank and self._alive(record):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(record["pid"]), signal.SIGTERM)
                deadline = time.monotonic() + notice_seconds
                while time.monotonic() < deadline and self._alive(record):
                    time.sleep(0.05)
                self._stop(record, new_state="terminated", hard=True)
                return preemption_event(record)
        return None

    # -- sandbox files ---------------------------------------------------------------------

    def _start_node(self, spec: LaunchSpec, rank: int) -> Node:
        sandbox = self.nodes_dir / spec.cluster_id / str(rank)
        sandbox.mkdir(parents=True, exist_ok=True)
        instance_id = f"local-{uuid.uuid5(uuid.NAMESPACE_URL, spec.attempt_id).hex[:10]}-{rank:03d}"
        ip = f"127.0.0.{rank + 2}"
        tags = {**spec.tags(), RANK_TAG: str(rank)}
        record = {
            "instance_id": instance_id,
            "cluster_id": spec.cluster_id,
            "job_id": spec.job_id,
            "attempt_id": spec.attempt_id,
            "rank": rank,
            "ip": ip,
            "state": "running",
            "cloud": spec.cloud,
            "region": spec.region,
            "zone": spec.zone,
            "instance_type": spec.instance_type,
            "use_spot": spec.use_spot,
            "hardware": _hardware(spec),
            "tags": tags,
            "launched_at": datetime.now(UTC).isoformat(),
        }
        self._spawn_agent(sandbox, record, spec.agent_env)
        _store(sandbox / NODE_FILE, record)
        return self._node(record)

    def _spawn_agent(self, sandbox: Path, record: dict[str, Any], agent_env: dict[str, str]) -> None:
        """Start the node's agent process in its sandbox; set the record's pid and start time."""
        inherited = inherited_environ()
        env = {
            **inherited,
            **agent_env,
            "SKYLESS_API_URL": agent_env.get("SKYLESS_API_URL", self.api_url or ""),
            "SKYLESS_JOB_ID": record["job_id"],
            "SKYLESS_CLUSTER_ID": record["cluster_id"],
            "SKYLESS_INSTANCE_ID": record["instance_id"],
            "SKYLESS_NODE_IP": record["ip"],
            "SKYLESS_NODE_HOME": str(sandbox),
            "HOME": str(sandbox),  # a VM of its own: `~` is the node's, not this machine's user's
            "SKYLESS_CLOUD": "local",
            ENV_PYTHONPATH: os.pathsep.join(
                p for p in (str(PROJECT_ROOT), inherited.get(ENV_PYTHONPATH)) if p
            ),
        }
        command = self.agent_command
        if agent_env.get("SKYLESS_AGENT_MODE") == "cluster" and command == AGENT_COMMAND:
            command = CLUSTER_AGENT_COMMAND
        with open(sandbox / "agent.log", "ab") as log:
            process = subprocess.Popen(
                command,
                cwd=sandbox,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        record["pid"] = process.pid
        record["start_ticks"] = _process_start_ticks(process.pid)

    # -- stop and start (named clusters): the sandbox is the node's disk, and it stays -------------

    def stop(self, cluster_id: str) -> None:
        """Stop every node of the cluster: its processes end, its sandbox (the disk) stays. Idempotent."""
        for record in self._read_cluster(cluster_id):
            if record.get("state") == "running":
                self._stop(record, new_state="stopped")

    def start(self, cluster_id: str, agent_env: dict[str, str]) -> list[Node]:
        """Start the stopped nodes of a cluster again in their own sandboxes (same ids, ranks and IPs).
        Nodes already running are left as they are, so a second start changes nothing."""
        self.nodes_dir.mkdir(parents=True, exist_ok=True)
        with open(self.nodes_dir / f".{cluster_id}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            records = self._read_cluster(cluster_id)
            if not records:
                raise InvalidLaunchError(f"local cloud: cluster {cluster_id} has no nodes to start")
            gone = [r["instance_id"] for r in records if r.get("state") == "terminated"]
            if gone:
                raise InvalidLaunchError(
                    f"local cloud: node(s) {', '.join(gone)} of {cluster_id} were terminated"
                )
            for record in records:
                if self._alive(record):
                    continue
                sandbox = self.nodes_dir / cluster_id / str(record["rank"])
                record["state"] = "running"
                record["started_at"] = datetime.now(UTC).isoformat()
                self._spawn_agent(sandbox, record, agent_env)
                _store(sandbox / NODE_FILE, record)
            return [self._node(r) for r in records]

    def node_home(self, cluster_id: str, rank: int) -> Path:
        """A node's sandbox: its home and its disk."""
        return self.nodes_dir / cluster_id / str(rank)

    def shell_environment(self, cluster_id: str, rank: int) -> dict[str, str]:
        """The environment of a shell on a node (`skyless ssh`): the node's home and identity, this
        machine's PATH and terminal; nothing of the control plane's (no credentials, no agent token)."""
        record = _load(self.node_home(cluster_id, rank) / NODE_FILE)
        if record is None:
            raise InvalidLaunchError(f"local cloud: cluster {cluster_id} has no node of rank {rank}")
        home = str(self.node_home(cluster_id, rank))
        inherited = inherited_environ()
        env = {name: inherited[name] for name in SHELL_PASSTHROUGH if name in inherited}
        env.update(
            {
                "HOME": home,
                "SKYLESS_NODE_HOME": home,
                "SKYLESS_NODE_IP": record["ip"],
                "SKYLESS_INSTANCE_ID": record["instance_id"],
                "SKYLESS_CLUSTER_ID": cluster_id,
                "SKYLESS_CLOUD": "local",
            }
        )
        return env

    def _read_cluster(self, cluster_id: str) -> list[dict[str, Any]]:
        folder = self.nodes_dir / cluster_id
        if not cluster_id or "/" in cluster_id or not folder.is_dir():
            return []
        records = [r for path in folder.glob(f"*/{NODE_FILE}") if (r := _load(path))]
        return sorted(records, key=lambda r: r["rank"])

    def _live_records_of_job(self, job_id: str) -> list[dict[str, Any]]:
        records = (self._record(n) for n in self.list_owned() if n.job_id == job_id)
        return [r for r in records if r and self._alive(r)]

    def _record(self, node: Node) -> dict[str, Any] | None:
        return _load(self.nodes_dir / node.cluster_id / node.tags.get(RANK_TAG, "0") / NODE_FILE)

    def _alive(self, record: dict[str, Any]) -> bool:
        if record.get("state") != "running":
            return False
        pid = int(record["pid"])
        _reap(pid)
        ticks = _process_start_ticks(pid)
        return ticks is not None and ticks == record.get("start_ticks")

    def _stop(self, record: dict[str, Any], new_state: str, hard: bool = False) -> None:
        pid = int(record["pid"])
        # Processes that left the agent's group (a named cluster's jobs each run in a session of their
        # own) and shells opened on the node (`skyless ssh`) end with the node too.
        strays = _descendants(pid) if self._alive(record) else []
        for shell in _session_pids(self.nodes_dir / record["cluster_id"] / str(record["rank"])):
            strays += [shell, *_descendants(shell)]
        if self._alive(record):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL if hard else signal.SIGTERM)
            deadline = time.monotonic() + 5
            while not hard and time.monotonic() < deadline and self._alive(record):
                time.sleep(0.05)
        if record.get("state") == "running":
            # A VM that goes takes every process on it: the agent may be gone while the task it started
            # (same process group, its own session) still runs.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            _reap(pid)
        for stray in strays:  # one by one: a shell's group may be its caller's (never signal that)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(stray, signal.SIGKILL)
            _reap(stray)
        if record.get("state") != new_state:
            record["state"] = new_state
            record["stopped_at"] = datetime.now(UTC).isoformat()
            path = self.nodes_dir / record["cluster_id"] / str(record["rank"]) / NODE_FILE
            _store(path, record)

    def _state_of(self, record: dict[str, Any]) -> str:
        if self._alive(record):
            return "running"
        return "stopped" if record.get("state") == "stopped" else "terminated"

    def _node(self, record: dict[str, Any]) -> Node:
        return Node(
            instance_id=record["instance_id"],
            cluster_id=record["cluster_id"],
            job_id=record["job_id"],
            ip=record["ip"],
            state=self._state_of(record),
            cloud=record["cloud"],
            region=record["region"],
            zone=record["zone"],
            instance_type=record["instance_type"],
            use_spot=record["use_spot"],
            tags={**record["tags"], JOB_TAG: record["job_id"], CLUSTER_TAG: record["cluster_id"]},
        )


def _runs_containers(record: dict[str, Any]) -> bool:
    image = (record.get("hardware") or {}).get("image_id")
    images = image.values() if isinstance(image, dict) else [image]
    return any(is_container_image(i) for i in images)


def _hardware(spec: LaunchSpec) -> dict[str, Any]:
    """What a real cloud would attach to the VM beyond its type, kept so that it can be checked."""
    return {
        "accelerator": spec.accelerator,
        "accelerator_count": spec.accelerator_count,
        "image_id": spec.image_id,
        "disk_size_gb": spec.disk_size_gb,
        "ports": list(spec.ports),
        "labels": dict(spec.labels),
    }


def preemption_event(record: dict[str, Any]) -> dict[str, Any]:
    """The EventBridge spot interruption warning AWS would send, with source `skyless.local`."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "skyless.local",
        "account": "000000000000",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": record["region"],
        "resources": [f"arn:aws:ec2:{record['region']}:000000000000:instance/{record['instance_id']}"],
        "detail": {"instance-id": record["instance_id"], "instance-action": "terminate"},
    }


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _store(path: Path, record: dict[str, Any]) -> None:
    """Write the record whole; a temporary file per writer, since the CLI (`local preempt`) and the runtime
    may end the same node at once, and one's rename would take the other's file away mid-write."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(json.dumps(record, indent=2))
    temporary.replace(path)
