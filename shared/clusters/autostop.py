"""Autostop from the control plane: no process waits, on the node or anywhere else.

When a cluster becomes idle (its last job ended, its last shell closed, it came UP with nothing queued), its
`idle_since` is set and a delayed message asks again once the idle time has passed (SQS delays at most 900 s,
so a longer wait is a chain of messages). The check stops the cluster (or tears it down, with `down`) only if
it is still UP, still idle, and idle since that same moment: any job or shell in between cleared
`idle_since`, and the next idle moment sent a check of its own. The stop is a conditional move (UP ->
STOPPING on the version read), so an `exec` that lands at the same time either wins (the stop is not taken)
or finds the cluster STOPPING and is refused.

SkyPilot runs this inside each cluster (its skylet checks every 60 s); its `wait_for` is always
`jobs_and_ssh` here (no running job, no open shell), and `hook` is not run.
"""

from __future__ import annotations

import re
import time
from typing import Any

from shared.clusters.facts import is_busy
from shared.clusters.messages import ClusterMessage, send_cluster_step
from shared.clusters.states import ClusterState
from shared.jobs.outcomes import Outcome
from shared.store.cluster_records import ClusterStore, NamedClusterModel
from shared.wiring import Wiring

DEFAULT_IDLE_MINUTES = 5  # SkyPilot's default for `autostop: true`
UNITS = {"m": 1, "h": 60, "d": 60 * 24, "w": 60 * 24 * 7}
ATTEMPTS_ON_RACE = 5


def autostop_of_task(task: Any) -> tuple[int, bool] | None:
    """`resources.autostop` as (idle minutes, down), (-1, False) for `false`, None when not given."""
    raw = task.resources.autostop
    if raw is None:
        return None
    if isinstance(raw, bool):
        return (DEFAULT_IDLE_MINUTES, False) if raw else (-1, False)
    if isinstance(raw, int):
        return int(raw), False
    if isinstance(raw, str):
        match = re.match(r"^(\d+)([mhdw]?)$", raw.strip())
        if match is None:  # the task loader refuses these; kept total
            return None
        return int(match.group(1)) * UNITS[match.group(2) or "m"], False
    minutes = raw.idle_minutes if raw.idle_minutes is not None else DEFAULT_IDLE_MINUTES
    return int(minutes), bool(raw.down)


def idle_seconds(wiring: Wiring, cluster: NamedClusterModel) -> float:
    return int(cluster.autostop_minutes) * wiring.settings.autostop_minute_seconds


def after_becoming_idle(wiring: Wiring, cluster: NamedClusterModel) -> None:
    """Send the check for the idle period that began at `cluster.idle_since` (if autostop is on)."""
    if int(cluster.autostop_minutes) < 0 or cluster.idle_since is None:
        return
    due = float(cluster.idle_since) + idle_seconds(wiring, cluster)
    send_cluster_step(
        wiring,
        cluster.key,
        "autostop",
        idle_since=float(cluster.idle_since),
        delay_seconds=max(0, due - time.time()),
    )


def mark_idle_if_idle(wiring: Wiring, key: str) -> None:
    """If the cluster is UP and idle with no idle period open, open one (and send its check)."""
    store = ClusterStore(wiring.settings)
    for _ in range(ATTEMPTS_ON_RACE):
        cluster = store.get(key)
        if cluster is None or cluster.state != ClusterState.UP or is_busy(cluster):
            return
        if cluster.idle_since is not None:
            return
        if store.write_cluster(cluster, {"idle_since": time.time()}):
            after_becoming_idle(wiring, cluster)
            return


def check_autostop(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, message: ClusterMessage
) -> Outcome:
    """The delayed check: stop (or tear down) the cluster if it stayed idle the whole autostop time."""
    for _ in range(ATTEMPTS_ON_RACE):
        if cluster.state != ClusterState.UP or int(cluster.autostop_minutes) < 0:
            return Outcome.STALE
        if is_busy(cluster) or cluster.idle_since is None or message.idle_since is None:
            return Outcome.STALE  # in use since: its next idle moment sends its own check
        if abs(float(cluster.idle_since) - message.idle_since) > 1e-3:
            return Outcome.STALE  # a later idle period, with its own check
        due = float(cluster.idle_since) + idle_seconds(wiring, cluster)
        now = time.time()
        if now < due - 0.5:
            send_cluster_step(
                wiring, cluster.key, "autostop", idle_since=message.idle_since, delay_seconds=due - now
            )
            return Outcome.RETRY_LATER
        down = bool(cluster.autostop_down)
        from shared.clusters.stopping import cluster_stop_refusal

        refusal = None if down else cluster_stop_refusal(wiring, cluster)
        if refusal is not None:
            store.note(cluster.key, "autostop", f"autostop cannot stop this cluster: {refusal}")
            return Outcome.STALE
        to = ClusterState.TERMINATING if down else ClusterState.STOPPING
        minutes = int(cluster.autostop_minutes)
        text = f"autostop: idle for {minutes} min, {'tearing down' if down else 'stopping'}"
        if store.write_cluster(cluster, {"state": to.value, "reason": text}, message=text):
            send_cluster_step(wiring, cluster.key, "down" if down else "stop")
            return Outcome.DONE
        latest = store.get(cluster.key)
        if latest is None:
            return Outcome.STALE
        cluster = latest
    return Outcome.RETRY_LATER
