"""The verbs that change whether a named cluster's nodes run: `stop`, `start`, `down`, `autostop`. Each is
one conditional write (the decision) and, when the cloud must act, one queue message (start_stop.py acts on
it). Repeating a verb is harmless: a second `down` finds the cluster TERMINATING or gone, a second `stop`
finds it STOPPING or STOPPED. Also `find_cluster`, which every verb and view starts with."""

from __future__ import annotations

from shared.clusters.autostop import after_becoming_idle, mark_idle_if_idle
from shared.clusters.messages import send_cluster_step
from shared.clusters.names import check_cluster_name
from shared.clusters.states import ClusterState
from shared.clusters.stopping import STOP_HINT, cluster_stop_refusal
from shared.config import Settings
from shared.errors import ConflictError, NotFoundError, UserError
from shared.store.cluster_records import ClusterStore, NamedClusterModel
from shared.wiring import Wiring, wiring_for

ATTEMPTS_ON_RACE = 5


def _store(settings: Settings) -> tuple[Wiring, ClusterStore]:
    return wiring_for(settings), ClusterStore(settings)


def find_cluster(settings: Settings, owner: str, name: str) -> NamedClusterModel:
    """The caller's cluster of that name (a TERMINATED one is gone); NotFoundError otherwise."""
    check_cluster_name(name)
    cluster = ClusterStore(settings).by_name(owner, name)
    if cluster is None or cluster.state == ClusterState.TERMINATED:
        raise NotFoundError(
            f"no cluster {name}", field="cluster", hint="`skyless status` lists your clusters"
        )
    return cluster


def stop_cluster(settings: Settings, *, owner: str, name: str) -> NamedClusterModel:
    wiring, store = _store(settings)
    for _ in range(ATTEMPTS_ON_RACE):
        cluster = find_cluster(settings, owner, name)
        state = ClusterState(cluster.state)
        if state in (ClusterState.STOPPING, ClusterState.STOPPED):
            return cluster
        if state != ClusterState.UP:
            raise ConflictError(
                f"cluster {name} is {state.value}; only an UP cluster can be stopped", field="cluster"
            )
        refusal = cluster_stop_refusal(wiring, cluster)
        if refusal is not None:
            raise UserError(f"cannot stop cluster {name}: {refusal}", field="cluster", hint=STOP_HINT)
        changes = {"state": ClusterState.STOPPING.value, "reason": "stopped by the user"}
        if store.write_cluster(cluster, changes, message="STOPPING: stop requested"):
            send_cluster_step(wiring, cluster.key, "stop")
            return cluster
    raise ConflictError(f"cluster {name} kept changing; try again", field="cluster")


def start_cluster(settings: Settings, *, owner: str, name: str) -> NamedClusterModel:
    wiring, store = _store(settings)
    for _ in range(ATTEMPTS_ON_RACE):
        cluster = find_cluster(settings, owner, name)
        state = ClusterState(cluster.state)
        if state in (ClusterState.UP, ClusterState.INIT):
            return cluster
        if state != ClusterState.STOPPED:
            raise ConflictError(
                f"cluster {name} is {state.value}", field="cluster", hint="start it once it is STOPPED"
            )
        if request_start(wiring, store, cluster):
            return cluster
    raise ConflictError(f"cluster {name} kept changing; try again", field="cluster")


def request_start(wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel) -> bool:
    changes = {
        "state": ClusterState.INIT.value,
        "pending_op": "start",
        "reason": None,
        "transient_retries": 0,
    }
    if not store.write_cluster(cluster, changes, message="INIT: starting the stopped nodes"):
        return False
    send_cluster_step(wiring, cluster.key, "start", incarnation=int(cluster.incarnation))
    return True


def down_cluster(settings: Settings, *, owner: str, name: str) -> NamedClusterModel:
    wiring, store = _store(settings)
    for _ in range(ATTEMPTS_ON_RACE):
        cluster = find_cluster(settings, owner, name)
        if cluster.state == ClusterState.TERMINATING:
            send_cluster_step(wiring, cluster.key, "down")  # harmless again; brings a lost one back
            return cluster
        changes = {
            "state": ClusterState.TERMINATING.value,
            "reason": "torn down by the user",
            "pending_op": None,
        }
        if store.write_cluster(cluster, changes, message="TERMINATING: teardown requested"):
            send_cluster_step(wiring, cluster.key, "down")
            return cluster
    raise ConflictError(f"cluster {name} kept changing; try again", field="cluster")


def set_autostop(
    settings: Settings, *, owner: str, name: str, idle_minutes: int, down: bool = False
) -> NamedClusterModel:
    """`idle_minutes` < 0 turns autostop off (SkyPilot's `--cancel`)."""
    wiring, store = _store(settings)
    cluster = find_cluster(settings, owner, name)
    if idle_minutes >= 0 and not down and cluster.provider is not None:
        refusal = cluster_stop_refusal(wiring, cluster)
        if refusal is not None:
            raise UserError(
                f"autostop cannot stop cluster {name}: {refusal}", field="idle_minutes", hint=STOP_HINT
            )
    return write_autostop(wiring, store, cluster, idle_minutes, down)


def write_autostop(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, minutes: int, down: bool
) -> NamedClusterModel:
    text = f"autostop set: {minutes} min" + (" (down)" if down else "") if minutes >= 0 else "autostop off"
    changes = {"autostop_minutes": int(minutes), "autostop_down": bool(down)}
    store.write_cluster(cluster, changes, check="none", message=text, kind="autostop")
    latest = store.get(cluster.key) or cluster
    if minutes >= 0 and latest.state == ClusterState.UP:
        if latest.idle_since is None:
            mark_idle_if_idle(wiring, latest.key)
        else:
            after_becoming_idle(wiring, latest)  # the idle time counts from when it became idle
    return latest
