"""The job states and the table of allowed moves. Every other module asks this one."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    PENDING = "PENDING"
    PLANNED = "PLANNED"
    PROVISIONING = "PROVISIONING"
    WAITING = "WAITING"
    SETTING_UP = "SETTING_UP"
    RUNNING = "RUNNING"
    RECOVERING = "RECOVERING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"  # SkyPilot's: `setup` exited non-zero on a node
    FAILED_NO_RESOURCE = "FAILED_NO_RESOURCE"  # SkyPilot's: no candidate had capacity, every round tried
    CANCELLED = "CANCELLED"


# SkyPilot's failure states a user scripts against (sky/jobs/state.py ManagedJobStatus.failure_statuses).
FAILURES: frozenset[JobState] = frozenset(
    {JobState.FAILED, JobState.FAILED_SETUP, JobState.FAILED_NO_RESOURCE}
)
TERMINAL: frozenset[JobState] = frozenset({JobState.SUCCEEDED, JobState.CANCELLED}) | FAILURES
LIVE: frozenset[JobState] = frozenset(JobState) - TERMINAL
HAS_NODES: frozenset[JobState] = frozenset({JobState.SETTING_UP, JobState.RUNNING})

_S = JobState
# (from, to, why): the only moves there are. Any non-terminal state may also go to FAILED or CANCELLED.
MOVES: tuple[tuple[JobState, JobState, str], ...] = (
    (_S.PENDING, _S.PLANNED, "the optimizer found a plan"),
    (_S.PLANNED, _S.PROVISIONING, "launching the plan's candidates"),
    (_S.PLANNED, _S.SETTING_UP, "every node launched (the first step of provisioning worked)"),
    (_S.PLANNED, _S.WAITING, "no candidate had capacity; retrying later"),
    (_S.PROVISIONING, _S.SETTING_UP, "every node launched"),
    (_S.PROVISIONING, _S.WAITING, "no candidate had capacity; retrying later"),
    (_S.PROVISIONING, _S.PLANNED, "re-planned after blocks"),
    (_S.WAITING, _S.PROVISIONING, "retrying the candidates"),
    (_S.WAITING, _S.PLANNED, "re-planned while waiting"),
    (_S.SETTING_UP, _S.RUNNING, "setup finished, run started"),
    (_S.RUNNING, _S.PLANNED, "the next task of the pipeline"),
    (_S.SETTING_UP, _S.PLANNED, "the next task of the pipeline"),
    (_S.RUNNING, _S.SUCCEEDED, "every node exited 0"),
    (_S.SETTING_UP, _S.SUCCEEDED, "every node exited 0"),
    (_S.SETTING_UP, _S.RECOVERING, "a node was preempted or lost"),
    (_S.RUNNING, _S.RECOVERING, "a node was preempted or lost"),
    (_S.PROVISIONING, _S.RECOVERING, "a node was preempted before it reported"),
    (_S.RECOVERING, _S.PLANNED, "re-planned with the blocklist"),
    (_S.RECOVERING, _S.SETTING_UP, "the new capacity, obtained first, took over once the old was fenced"),
    (_S.PROVISIONING, _S.RUNNING, "every task of a job group is running (a group has no nodes of its own)"),
    (_S.PROVISIONING, _S.SUCCEEDED, "a job group's primary tasks succeeded before every task ran"),
    (_S.SETTING_UP, _S.FAILED_SETUP, "setup failed on a node, no restart left"),
    *((s, _S.FAILED_NO_RESOURCE, "no capacity anywhere") for s in (_S.PLANNED, _S.PROVISIONING, _S.WAITING)),
    *((s, _S.FAILED, "failed") for s in LIVE),
    *((s, _S.CANCELLED, "cancelled") for s in LIVE),
)
ALLOWED: frozenset[tuple[JobState, JobState]] = frozenset((a, b) for a, b, _ in MOVES)


class IllegalTransition(Exception):
    """A move the table does not allow: a bug in the caller, or a message about a job that moved on."""

    def __init__(self, current: JobState, to: JobState) -> None:
        super().__init__(f"a job cannot move from {current} to {to}")
        self.current = current
        self.to = to


def can_move(current: JobState | str, to: JobState | str) -> bool:
    return (JobState(current), JobState(to)) in ALLOWED


def transition(current: JobState | str, to: JobState | str) -> JobState:
    """The new state, or IllegalTransition."""
    current, to = JobState(current), JobState(to)
    if (current, to) not in ALLOWED:
        raise IllegalTransition(current, to)
    return to


def is_terminal(state: JobState | str) -> bool:
    return JobState(state) in TERMINAL


def is_failure(state: JobState | str) -> bool:
    return JobState(state) in FAILURES
