"""The local cloud's sandbox: a private mount namespace, so absolute mount paths are where the task names
them. `namespace_command` runs this file as a script (`python sandbox.py --mount-namespace SPEC ARGV...`),
which enters the namespace and execs ARGV: it imports nothing but the standard library."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def enter_mount_namespace(spec: dict[str, Any], argv: list[str]) -> None:
    """Unshare a mount namespace (and a user namespace when not root), build a root where each of
    spec["binds"] [target, source] is mounted at its target over a view of the real root, chroot into
    it and exec `argv`. The caller's files stay where they are; nothing outside this process tree sees it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"{what}: {os.strerror(number)}")

    def mount(
        source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
    ) -> None:
        encode = lambda t: t.encode() if t is not None else None  # noqa: E731
        check(libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)),
              f"mount {target}")  # fmt: skip

    uid, gid = os.geteuid(), os.getegid()
    check(libc.unshare(0x00020000 | (0x10000000 if uid else 0)), "unshare")  # CLONE_NEWNS, CLONE_NEWUSER
    if uid:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as out:
                out.write(text)
    bind, recursive = 4096, 16384
    mount(None, "/", None, recursive | (1 << 18))  # MS_REC | MS_PRIVATE: nothing leaks to the host
    root = spec["root"]
    mount("tmpfs", root, "tmpfs", 0, "mode=755")
    tree: dict[str, Any] = {}
    for target, _ in spec["binds"]:
        node = tree
        for part in target.strip("/").split("/"):
            node = node.setdefault(part, {})

    def shadow(real: str | None, new: str, needed: dict[str, Any]) -> None:
        base = real if real and os.path.isdir(real) else ""
        for name in sorted(os.listdir(base)) if base else []:
            source, here = os.path.join(base, name), os.path.join(new, name)
            if name in needed:
                continue
            if os.path.islink(source):
                os.symlink(os.readlink(source), here)
                continue
            if os.path.isdir(source):
                os.mkdir(here)
            else:
                open(here, "w").close()
            with contextlib.suppress(OSError):
                mount(source, here, None, bind | recursive)
        for name, deeper in needed.items():
            if deeper:
                os.makedirs(os.path.join(new, name), exist_ok=True)
                real_child = os.path.join(real, name) if real else None
                shadow(real_child if real_child and not os.path.islink(real_child) else None,
                       os.path.join(new, name), deeper)  # fmt: skip

    shadow("/", root, tree)
    for target, source in spec["binds"]:
        here = root + target
        if os.path.isdir(source):
            os.makedirs(here, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(here), exist_ok=True)
            open(here, "a").close()
        mount(source, here, None, bind | recursive)
    libc.umount2((root + root).encode(), 2)  # the view's copy of itself (MNT_DETACH); absent is fine
    os.chroot(root)
    os.chdir(spec.get("cwd") or "/")
    os.execvp(argv[0], argv)


def namespace_binds(paths: list[str], home: Path) -> list[list[str]]:
    """[target, where it is kept under the node's home] for each absolute path, outermost only."""
    absolute = sorted({p.rstrip("/") for p in paths if p.startswith("/") and p.rstrip("/")})
    outer = [p for p in absolute if not any(p.startswith(o + "/") for o in absolute)]
    return [[p, str(home / p.lstrip("/"))] for p in outer]  # as mounts.mount_path puts it in a sandbox


def namespace_command(binds: list[list[str]], home: Path, cwd: Path) -> list[str]:
    spec = {"root": str(home / ".skyless-root"), "binds": binds, "cwd": str(cwd)}
    (home / ".skyless-root").mkdir(parents=True, exist_ok=True)
    return [sys.executable, os.path.abspath(__file__), "--mount-namespace", json.dumps(spec)]


def mount_namespace_works(home: Path) -> bool:
    """True when this machine lets a node give its task a private mount namespace."""
    probe = home / ".skyless-probe"
    probe.mkdir(parents=True, exist_ok=True)
    command = namespace_command([["/skyless-probe", str(probe)]], home, home)
    try:
        done = subprocess.run([*command, "test", "-d", "/skyless-probe"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


if __name__ == "__main__" and len(sys.argv) > 3 and sys.argv[1] == "--mount-namespace":
    enter_mount_namespace(json.loads(sys.argv[2]), sys.argv[3:])  # execs the task; returns only on error
    sys.exit(127)
