"""Named clusters' states and their jobs' states, each with its table of allowed moves. Pure data: every
other module of shared/clusters asks this one, as the job lifecycle asks shared/states.py.

A cluster (SkyPilot's names where it has them):

    INIT ──> UP ──> STOPPING ──> STOPPED ──> INIT (starting again) ──> UP
      │       │        │            │
      └───────┴────────┴────────────┴──> TERMINATING ──> TERMINATED

INIT is a launch (failover over the plan's candidates, waiting when nothing has room) or a start of a
stopped cluster; only an INIT launch fails over (an UP or STOPPED cluster keeps its place, as in SkyPilot).
A launch that finds no place anywhere, or a start that cannot get its nodes back, ends in TERMINATING
(launch) or STOPPED (start). STOPPING and TERMINATING are the moments between the decision (a conditional
write) and the cloud's answer (a queue message does the cloud call), so a decision is never lost and
never taken twice.

A cluster job (SkyPilot's job queue statuses):

    PENDING ──> SETTING_UP ──> RUNNING ──> SUCCEEDED | FAILED
       │             └──> FAILED_SETUP
       └──> RUNNING (exec: no setup)                  any live ──> CANCELLED | FAILED
"""

from __future__ import annotations

from enum import StrEnum


class ClusterState(StrEnum):
    INIT = "INIT"
    UP = "UP"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"


_C = ClusterState
CLUSTER_MOVES: tuple[tuple[ClusterState, ClusterState, str], ...] = (
    (_C.INIT, _C.UP, "every node launched"),
    (_C.INIT, _C.STOPPED, "the stopped nodes could not be started"),
    (_C.UP, _C.STOPPING, "stop requested (by the user or autostop)"),
    (_C.STOPPING, _C.STOPPED, "every node stopped, disks kept"),
    (_C.STOPPED, _C.INIT, "start requested"),
    *((s, _C.TERMINATING, "teardown requested") for s in (_C.INIT, _C.UP, _C.STOPPING, _C.STOPPED)),
    (_C.TERMINATING, _C.TERMINATED, "every node terminated"),
)
CLUSTER_ALLOWED: frozenset[tuple[ClusterState, ClusterState]] = frozenset((a, b) for a, b, _ in CLUSTER_MOVES)
# Where jobs may be queued (a launch queues its job while the cluster is still coming up) ...
ACCEPTS_JOBS: frozenset[ClusterState] = frozenset({_C.INIT, _C.UP})
# ... and where `exec` may queue one: SkyPilot's exec needs the cluster UP.
ACCEPTS_EXEC: frozenset[ClusterState] = frozenset({_C.UP})
# What the reaper must leave alone: nodes of a cluster in these states belong to it (STOPPED included).
HOLDS_NODES: frozenset[ClusterState] = frozenset(ClusterState) - {_C.TERMINATED}


class ClusterJobState(StrEnum):
    PENDING = "PENDING"
    SETTING_UP = "SETTING_UP"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"
    CANCELLED = "CANCELLED"


_J = ClusterJobState
JOB_TERMINAL: frozenset[ClusterJobState] = frozenset({_J.SUCCEEDED, _J.FAILED, _J.FAILED_SETUP, _J.CANCELLED})
JOB_LIVE: frozenset[ClusterJobState] = frozenset(ClusterJobState) - JOB_TERMINAL
JOB_STARTED: frozenset[ClusterJobState] = frozenset({_J.SETTING_UP, _J.RUNNING})
JOB_MOVES: tuple[tuple[ClusterJobState, ClusterJobState, str], ...] = (
    (_J.PENDING, _J.SETTING_UP, "started on the cluster: setup first"),
    (_J.PENDING, _J.RUNNING, "started on the cluster (no setup)"),
    (_J.SETTING_UP, _J.RUNNING, "setup finished on every node"),
    (_J.SETTING_UP, _J.FAILED_SETUP, "setup failed on a node"),
    (_J.SETTING_UP, _J.SUCCEEDED, "every node exited 0"),
    (_J.RUNNING, _J.SUCCEEDED, "every node exited 0"),
    *((s, _J.FAILED, "failed") for s in JOB_LIVE),
    *((s, _J.CANCELLED, "cancelled") for s in JOB_LIVE),
)
JOB_ALLOWED: frozenset[tuple[ClusterJobState, ClusterJobState]] = frozenset((a, b) for a, b, _ in JOB_MOVES)


class IllegalClusterMove(Exception):
    """A move the tables do not allow: a bug in the caller, or a decision about something that moved on."""

    def __init__(self, what: str, current: str, to: str) -> None:
        super().__init__(f"a {what} cannot move from {current} to {to}")
        self.current = current
        self.to = to


def can_move_cluster(current: ClusterState | str, to: ClusterState | str) -> bool:
    return (ClusterState(current), ClusterState(to)) in CLUSTER_ALLOWED


def cluster_transition(current: ClusterState | str, to: ClusterState | str) -> ClusterState:
    """The new state, or IllegalClusterMove."""
    if not can_move_cluster(current, to):
        raise IllegalClusterMove("cluster", str(current), str(to))
    return ClusterState(to)


def can_move_job(current: ClusterJobState | str, to: ClusterJobState | str) -> bool:
    return (ClusterJobState(current), ClusterJobState(to)) in JOB_ALLOWED


def job_transition(current: ClusterJobState | str, to: ClusterJobState | str) -> ClusterJobState:
    if not can_move_job(current, to):
        raise IllegalClusterMove("cluster job", str(current), str(to))
    return ClusterJobState(to)


def is_job_terminal(state: ClusterJobState | str) -> bool:
    return ClusterJobState(state) in JOB_TERMINAL
