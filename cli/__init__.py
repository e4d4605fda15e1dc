"""The `skyless` command line."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C before the verb's own code runs (while cli.main, the verb's area and its options are loaded and
    read): nothing has been done yet, so exit 130 at once with one line. Not an exception: raised at an
    arbitrary point of an import (a class body, a dataclass's `__set_name__`) it can turn into a traceback."""
    sys.stderr.write("interrupted: nothing was done\n")
    sys.stderr.flush()
    os._exit(130)


def is_interrupt(error: BaseException) -> bool:
    """Ctrl-C, also as Python 3.11 wraps one that lands in a class body being built (a lazily imported model's
    `__set_name__`): a RuntimeError caused by the KeyboardInterrupt."""
    return isinstance(error, KeyboardInterrupt) or (
        isinstance(error, RuntimeError) and isinstance(error.__cause__, KeyboardInterrupt)
    )


def hand_ctrl_c_to_the_verb() -> None:
    """The verb's own code starts: Ctrl-C is a KeyboardInterrupt again, which each verb turns into its own
    message (typer would end it as a silent exit 130)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# Only in the `skyless` program itself, never in a process that imports this package (a notebook, tests).
if (
    Path(sys.argv[0] if sys.argv else "").name == "skyless"
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
):
    signal.signal(signal.SIGINT, _interrupted_while_starting)
