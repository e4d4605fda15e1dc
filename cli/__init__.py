"""The `skyless` command line."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C while the command is still importing (cli.main, then the verb's area, loaded lazily): exit 130
    quietly (nothing has been done yet); once the verb is loaded, Ctrl-C is a KeyboardInterrupt again, which
    each verb turns into its own message."""
    if getattr(sys.modules.get("cli.main"), "verb_loaded", False):
        signal.default_int_handler(signum, frame)
    sys.stderr.write("interrupted: nothing was done\n")
    raise SystemExit(130)


# Only in the `skyless` program itself, never in a process that imports this package (a notebook, tests).
if (
    Path(sys.argv[0] if sys.argv else "").name == "skyless"
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
):
    signal.signal(signal.SIGINT, _interrupted_while_starting)
