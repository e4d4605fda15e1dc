from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.states import (
    ALLOWED,
    LIVE,
    TERMINAL,
    IllegalTransition,
    JobState,
    can_move,
    is_terminal,
    transition,
)


def test_the_happy_path_is_allowed() -> None:
    state = JobState.PENDING
    for to in ("PLANNED", "PROVISIONING", "SETTING_UP", "RUNNING", "SUCCEEDED"):
        state = transition(state, to)
    assert state is JobState.SUCCEEDED


def test_recovery_goes_back_through_planning() -> None:
    assert transition(JobState.RUNNING, JobState.RECOVERING) is JobState.RECOVERING
    assert transition(JobState.RECOVERING, JobState.PLANNED) is JobState.PLANNED
    with pytest.raises(IllegalTransition):
        transition(JobState.RECOVERING, JobState.RUNNING)


def test_terminal_states_never_move() -> None:
    for done in TERMINAL:
        for to in JobState:
            assert not can_move(done, to)


def test_every_live_state_can_be_cancelled_and_failed() -> None:
    for state in LIVE:
        assert can_move(state, JobState.CANCELLED)
        assert can_move(state, JobState.FAILED)


def test_unknown_state_names_are_rejected() -> None:
    with pytest.raises(ValueError):
        transition("PENDING", "DANCING")


@given(st.lists(st.sampled_from(list(JobState)), max_size=40))
def test_random_move_sequences_follow_the_table(moves: list[JobState]) -> None:
    state = JobState.PENDING
    for to in moves:
        if (state, to) in ALLOWED:
            assert transition(state, to) is to
            state = to
        else:
            with pytest.raises(IllegalTransition):
                transition(state, to)
    if is_terminal(state):
        assert all(not can_move(state, to) for to in JobState)


@given(st.lists(st.sampled_from(list(JobState)), max_size=40))
def test_every_state_reached_by_legal_moves_can_still_end(moves: list[JobState]) -> None:
    state = JobState.PENDING
    for to in moves:
        if can_move(state, to):
            state = to
    assert is_terminal(state) or can_move(state, JobState.CANCELLED)
