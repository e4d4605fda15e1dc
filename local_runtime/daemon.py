"""The local runtime: moto, the stack, the API over HTTP and the dispatcher, in one process.

`python -m local_runtime.daemon --home H --moto-port P --api-port Q` is what `skyless local up` starts
(detached); `LocalRuntime` is the same thing in-process (tests and the benchmark use it directly).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from local_runtime.api_server import ApiServer, load_app
from local_runtime.dispatcher import Dispatcher
from local_runtime.local_settings import FAKE_AWS_ENV, local_settings
from local_runtime.moto_endpoint import start_moto
from local_runtime.private_files import private_dir, write_private
from local_runtime.runtime_file import (
    DEFAULT_API_PORT,
    DEFAULT_MOTO_PORT,
    RuntimeInfo,
    local_dir,
    remove_runtime_info,
    write_runtime_info,
)
from local_runtime.state_snapshot import restore_snapshot, save_snapshot
from shared.config import Settings
from shared.config.env_names import ENV_LOCAL_SNAPSHOT_SECONDS

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

log = logging.getLogger("skyless.local")

SNAPSHOT_EVERY_SECONDS = float(os.environ.get(ENV_LOCAL_SNAPSHOT_SECONDS, "15"))
LOCAL_USER = "local"


def ensure_local_user(settings: Settings, key_file: Path) -> str:
    """The local user's API key: the one saved before if the users table still knows it, else a new one."""
    from shared.store.users import create_user, find_user

    if key_file.exists():
        key = key_file.read_text().strip()
        if key and find_user(key, settings) is not None:
            return key
    key = create_user(LOCAL_USER, settings, user_id="u-local", admin=True)  # the machine's owner
    write_private(key_file, key)
    return key


def terminate_local_nodes(settings: Settings) -> int:
    """Stop every node process the local cloud started. Answers how many were still running. A named
    cluster's nodes are stopped, not terminated (their sandboxes are their disks): `local up` starts them."""
    from shared.clouds.local import LocalCloud
    from shared.clusters.names import is_cluster_key

    cloud = LocalCloud(settings.home, api_url=settings.api_url)
    running = {(n.cluster_id, n.job_id) for n in cloud.list_owned() if n.state == "running"}
    for cluster_id, owner in running:
        if is_cluster_key(owner):
            cloud.stop(cluster_id)
        else:
            cloud.terminate(cluster_id)
    return len(running)


class LocalRuntime:
    """The whole control plane on this machine. `start()` then `stop()`; safe to stop twice."""

    def __init__(
        self,
        home: Path,
        moto_port: int = DEFAULT_MOTO_PORT,
        api_port: int = DEFAULT_API_PORT,
        *,
        schedules: dict[str, tuple[str, float]] | None = None,
        snapshot_every: float | None = SNAPSHOT_EVERY_SECONDS,
    ) -> None:
        self.home = home
        self.moto_port = moto_port
        self.api_port = api_port
        self.schedules = schedules
        self.snapshot_every = snapshot_every  # None: only at shutdown
        self.settings = local_settings(home, moto_port, api_port)
        self.snapshot_path = local_dir(home) / "state.json"
        self.moto: ThreadedMotoServer | None = None
        self.api: ApiServer | None = None
        self.dispatcher: Dispatcher | None = None
        self.api_key = ""
        self._stopping = threading.Event()
        self._snapshot_lock = threading.Lock()
        self._snapshotter: threading.Thread | None = None

    def environment(self) -> dict[str, str]:
        return {**FAKE_AWS_ENV, **self.settings.to_env()}

    def start(self) -> RuntimeInfo:
        from shared.stack import create_stack

        private_dir(self.home)
        private_dir(local_dir(self.home))
        os.environ.update(self.environment())
        self.moto = start_moto(self.moto_port)
        create_stack(self.settings)
        restored = restore_snapshot(self.settings, self.snapshot_path)
        log.info("restored %s", restored)
        self.api_key = ensure_local_user(self.settings, local_dir(self.home) / "api_key")
        self.api = ApiServer(load_app(), "127.0.0.1", self.api_port)
        self.api.start()
        self.dispatcher = Dispatcher(self.settings, schedules=self.schedules)
        self.dispatcher.start()
        try:
            from shared.clusters.health import resume_local_clusters
            from shared.wiring import wiring_for

            log.info("named clusters resumed: %s", resume_local_clusters(wiring_for(self.settings)))
        except Exception:
            log.exception("resuming named clusters failed")
        if self.snapshot_every:
            self._snapshotter = threading.Thread(
                target=self._snapshot_periodically, args=(self.snapshot_every,), name="snapshot", daemon=True
            )
            self._snapshotter.start()
        return RuntimeInfo(
            api_url=self.api.url,
            api_key=self.api_key,
            aws_endpoint_url=self.settings.endpoint_url or "",
            pid=os.getpid(),
            moto_port=self.moto_port,
            api_port=self.api_port,
            home=str(self.home),
        )

    def snapshot(self) -> None:
        with self._snapshot_lock:
            save_snapshot(self.settings, self.snapshot_path)

    def _snapshot_periodically(self, every: float) -> None:
        while not self._stopping.wait(every):
            try:
                self.snapshot()
            except Exception:
                log.exception("snapshot failed")

    def stop(self) -> None:
        """Stop taking work, stop every node, save the state, then stop the servers."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self.dispatcher is not None:
            self.dispatcher.stop()
        try:
            stopped = terminate_local_nodes(self.settings)
            log.info("stopped %d local node(s)", stopped)
        except Exception:
            log.exception("stopping local nodes failed")
        if self.api is not None:
            self.api.stop()
        if self.moto is not None:
            try:
                self.snapshot()
            except Exception:
                log.exception("final snapshot failed")
            self.moto.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_runtime.daemon")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--moto-port", type=int, default=DEFAULT_MOTO_PORT)
    parser.add_argument("--api-port", type=int, default=DEFAULT_API_PORT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("werkzeug", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    stop_requested = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.set())
    signal.signal(signal.SIGINT, lambda *_: stop_requested.set())
    runtime = LocalRuntime(args.home, args.moto_port, args.api_port)
    try:
        info = runtime.start()
        write_runtime_info(info)
        log.info("local runtime up: api %s, aws %s", info.api_url, info.aws_endpoint_url)
        while not stop_requested.wait(1.0):
            pass
    finally:
        log.info("local runtime stopping")
        remove_runtime_info(args.home)
        runtime.stop()
        log.info("local runtime stopped at %s", time.strftime("%H:%M:%S"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
