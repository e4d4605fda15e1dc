"""Canonical accelerator names: one spelling whatever the case and separators."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.catalog.accelerators import canonical_name, is_tpu, known_names, memory_gib

GPU_NAMES = sorted(n for n in known_names() if not n.startswith("tpu-"))


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("a100-80gb", "A100-80GB"),
        ("A100-80G", "A100-80GB"),
        ("a100_80gb", "A100-80GB"),
        ("a100 80gb", "A100-80GB"),
        ("H100-80GB", "H100"),
        ("h100", "H100"),
        ("h100-mega", "H100-MEGA"),
        ("a10g", "A10G"),
        ("a10", "A10"),
        ("t4g", "T4g"),
        ("rtx 4090", "RTX4090"),
        ("RTX6000Ada", "RTX6000-Ada"),
        ("gaudi hl-205", "Gaudi HL-205"),
        ("tpu-v4-8", "tpu-v4-8"),
        ("TPU-V4-8", "tpu-v4-8"),
        ("tpu-v5litepod-16", "tpu-v5litepod-16"),
        ("  l4 ", "L4"),
        ("my-new-gpu", "MY-NEW-GPU"),
    ],
)
def test_spellings_map_to_the_canonical_name(written: str, canonical: str) -> None:
    assert canonical_name(written) == canonical


def test_known_names_are_their_own_canonical_name() -> None:
    for name in known_names():
        assert canonical_name(name) == name


def _respell(name: str, flips: list[bool], separator: str) -> str:
    chars = [c.upper() if flip else c.lower() for c, flip in zip(name, flips, strict=False)]
    chars += list(name[len(chars) :])
    return "".join(chars).replace("-", separator).replace(" ", separator)


@given(
    name=st.sampled_from(GPU_NAMES),
    flips=st.lists(st.booleans(), max_size=20),
    separator=st.sampled_from(["-", "_", " ", ""]),
)
def test_any_case_and_separator_of_a_known_gpu_finds_it(name: str, flips: list[bool], separator: str) -> None:
    assert canonical_name(_respell(name, flips, separator)) == name


_NAME_TEXT = st.text(alphabet=string.ascii_letters + string.digits + "-_ .", min_size=1, max_size=24)


@given(_NAME_TEXT)
def test_canonical_name_is_idempotent(text: str) -> None:
    once = canonical_name(text)
    assert canonical_name(once) == once


@given(_NAME_TEXT)
def test_canonical_name_ignores_case(text: str) -> None:
    assert canonical_name(text.lower()) == canonical_name(text.upper()) == canonical_name(text)


def test_tpus_are_recognised_and_gpus_are_not() -> None:
    assert is_tpu("TPU-v4-8")
    assert not is_tpu("T4")


def test_accelerator_memory_is_known_for_common_gpus() -> None:
    assert memory_gib("a100-80g") == 80
    assert memory_gib("A100") == 40
    assert memory_gib("h100") == 80
    assert memory_gib("never-heard-of-it") is None
