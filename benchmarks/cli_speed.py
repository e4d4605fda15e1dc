"""What a person waits for when typing a `skyless` verb: the CPU time of the whole process, per verb.

Usage: .venv/bin/python benchmarks/cli_speed.py [--runs N] [--baseline DIR]

Each verb (`--help`, `status`, `queue`, `gpus`, `logs --help`) runs as a user types it, through the installed
`skyless` entry point with this tree first on PYTHONPATH, against a local runtime the script starts in a
temporary home (on free ports) and stops at the end, so `status` and `queue` measure the client, not a first
start; the unmeasured warm-up writes each tree's bytecode (PYTHONDONTWRITEBYTECODE is dropped), as an
installed skyless has it. Each run pairs every verb with a fixed floor (`python -c "import typer"`), and
with SkyPilot's `sky` where it is installed. --baseline DIR runs the same verbs from another checkout (e.g.
the previous commit's worktree) in the same runs. Prints min, median and max CPU seconds (user + system,
from wait4) over --runs processes (>= 5) and the ratio of each verb to the floor, and to `sky`, per run:
min, median, max.

`sky` (0.14) is a client of its API server: the warm-up runs each `sky` verb once unmeasured (twice if it
fails), which starts a local server if none answers (stopped at the end with `sky api stop` when this
script started it); a `sky` verb that fails there twice (e.g. `show-gpus` offline without its AWS catalog)
is left out and said so.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERBS: dict[str, list[str]] = {
    "--help": ["--help"],
    "status": ["status"],
    "queue": ["queue"],
    "gpus": ["gpus"],
    "logs --help": ["logs", "--help"],
}
SKY_VERBS: dict[str, list[str]] = {"gpus": ["show-gpus"]}  # SkyPilot's name; the rest are the same words


class VerbFailed(SystemExit):
    """A verb's process failed or hung: fatal for skyless's verbs, a verb left out for `sky`'s."""


def cpu_seconds(argv: list[str], env: dict[str, str], timeout: float = 300) -> float:
    """The CPU time (user + system) of one whole process, which must exit 0 within `timeout` seconds
    (counted by the children's rusage: processes run one at a time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise VerbFailed(f"{' '.join(argv)} took over {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip()[-300:]
        raise VerbFailed(f"{' '.join(argv)} exited {proc.returncode}: {tail}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spread(values: list[float], unit: str = "s", digits: int = 3) -> str:
    return (
        f"min {min(values):.{digits}f}{unit}  median {statistics.median(values):.{digits}f}{unit}  "
        f"max {max(values):.{digits}f}{unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same runs")
    args = parser.parse_args()
    runs = max(5, args.runs)
    entry = Path(sys.executable).parent / "skyless"
    sky = shutil.which("sky")
    with tempfile.TemporaryDirectory(prefix="cli-speed-") as home:
        # PYTHONDONTWRITEBYTECODE would have every run compile this tree's modules again: a user's
        # installed skyless has its bytecode, so the unmeasured warm-up writes it here too
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("SKYLESS_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        env = {
            **base,
            "HOME": home,
            "PYTHONPATH": str(ROOT),
            "SKYLESS_LOCAL_MOTO_PORT": str(free_port()),
            "SKYLESS_LOCAL_API_PORT": str(free_port()),
        }
        trees: dict[str, dict[str, str]] = {"skyless": env}
        if args.baseline:
            trees["baseline"] = {**env, "PYTHONPATH": str(args.baseline.resolve())}
        subprocess.run([str(entry), "local", "up"], cwd=ROOT, env=env, check=True, capture_output=True)
        try:
            for tree_env in trees.values():  # compile bytecode, warm the runtime's first answers: unmeasured
                for words in VERBS.values():
                    cpu_seconds([str(entry), *words], tree_env)
            sky_verbs: dict[str, list[str]] = {}
            sky_failed: dict[str, str] = {}
            started_server = False
            if sky:
                started_server = not sky_server_answers(sky, base)
                for verb, words in VERBS.items():
                    for _ in range(2):  # the first verb that needs sky's server starts it: on a loaded
                        try:  # machine that start can outlast the verb's own wait, not the next
                            cpu_seconds([sky, *SKY_VERBS.get(verb, words)], base)
                            sky_verbs[verb] = SKY_VERBS.get(verb, words)
                            sky_failed.pop(verb, None)
                            break
                        except VerbFailed as failure:
                            sky_failed[verb] = str(failure)
            floor: list[float] = []
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(runs):
                floor.append(cpu_seconds([sys.executable, "-c", "import typer"], env))
                for verb, words in VERBS.items():
                    for tree, tree_env in trees.items():
                        times.setdefault((tree, verb), []).append(cpu_seconds([str(entry), *words], tree_env))
                    if sky and verb in sky_verbs:
                        times.setdefault(("sky", verb), []).append(cpu_seconds([sky, *sky_verbs[verb]], base))
        finally:
            subprocess.run([str(entry), "local", "down"], cwd=ROOT, env=env, capture_output=True)
            if sky and started_server:
                subprocess.run([sky, "api", "stop"], env=base, capture_output=True, timeout=120)
    print(f"CPU seconds of the whole process, {runs} runs; floor `python -c 'import typer'`: {spread(floor)}")
    for verb in VERBS:
        for tree in (*trees, *(("sky",) if verb in sky_verbs else ())):
            values = times[(tree, verb)]
            ratios = [value / low for value, low in zip(values, floor, strict=True)]
            line = f"{tree:8} {verb:12} {spread(values)}  ÷ floor {spread(ratios, 'x', 2)}"
            if tree == "skyless" and "baseline" in trees:
                before = [b / value for b, value in zip(times[("baseline", verb)], values, strict=True)]
                line += f"  baseline ÷ this {spread(before, 'x', 2)}"
            if tree != "sky" and verb in sky_verbs:
                versus = [s / value for s, value in zip(times[("sky", verb)], values, strict=True)]
                line += f"  sky ÷ this {spread(versus, 'x', 2)}"
            print(line)
    if not sky:
        print("SkyPilot's `sky` is not installed here: no side-by-side ratio with it")
    for verb, why in sky_failed.items():
        print(f"sky {verb}: not measured ({why})")


def sky_server_answers(sky: str, env: dict[str, str]) -> bool:
    """Whether a SkyPilot API server already answers (`sky api info` asks without starting one)."""
    info = subprocess.run([sky, "api", "info"], env=env, capture_output=True, text=True, timeout=120)
    return info.returncode == 0 and "healthy" in info.stdout.lower()


if __name__ == "__main__":
    main()
