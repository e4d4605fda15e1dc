"""The workdir (a tarball or a git clone) and file mounts, fetched to where the task names them."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from node_agent.agent.api import AgentHttpError, http_request, with_retries


def safe_extract(archive: tarfile.TarFile, destination: Path) -> None:
    """Extract a tarball, refusing members that would land outside the destination."""
    root = destination.resolve()
    for member in archive.getmembers():
        target = (destination / member.name).resolve()
        if target != root and root not in target.parents:
            raise ValueError(f"workdir archive member escapes the workdir: {member.name}")
        if member.issym() or member.islnk():
            continue
        archive.extract(member, str(destination))


def download(url: str) -> bytes:
    status, body = with_retries(lambda: http_request(url, timeout=300))
    if status != 200:
        raise AgentHttpError(status, body.decode("utf-8", "replace"))
    return body


def fetch_workdir(url: str | None, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    if not url:
        return
    data = download(url)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        safe_extract(archive, workdir)


def clone_workdir(source: dict[str, Any], workdir: Path) -> None:
    """A git workdir: a clone of `url` at `ref` (a branch, tag or commit; none: the remote's default branch).
    A workdir already holding a clone of `url` (an earlier job on this cluster, an earlier start of this
    node) is fetched and moved to `ref`, a branch to its newest commit, as SkyPilot's git_clone.sh updates
    it; a clone of another repository, or files that are no clone, are refused as git_clone.sh refuses them.
    (The shipped agent must fit EC2's user-data: keep this short.)"""
    url, ref = str(source["url"]), source.get("ref")

    def git(at: Path | None, *args: str) -> str:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # a private repo fails, never asks for a password
        try:
            done = subprocess.run(
                ["git", *args], cwd=at, capture_output=True, text=True, timeout=1800, env=env
            )
        except subprocess.TimeoutExpired:
            raise ValueError(f"git {args[0]} took over 30 minutes") from None
        if done.returncode != 0:
            raise ValueError(f"git {args[0]} failed: {done.stderr.strip()[-500:]}")
        return done.stdout.strip()

    if not (workdir.exists() and any(workdir.iterdir())):
        git(None, "clone", "-q", url, str(workdir))
    elif _repository(git(workdir, "remote", "get-url", "origin")) != _repository(url):  # no clone: fails
        raise ValueError(f"the workdir holds a clone of another repository than {url}")
    git(workdir, "fetch", "-qf", "--tags", "origin")
    if not ref:
        git(workdir, "remote", "set-head", "origin", "-a")
        ref = git(workdir, "symbolic-ref", "--short", "refs/remotes/origin/HEAD")[7:]  # less "origin/"
    if f"origin/{ref}" in git(workdir, "branch", "-r").split():  # a branch: its newest commit
        git(workdir, "checkout", "-qfB", ref, f"origin/{ref}")
    else:  # a tag or a commit
        git(workdir, "checkout", "-qf", "--detach", ref)


def _repository(url: str) -> str:
    url = url.rstrip("/")
    return url[:-4] if url.endswith(".git") else url


def mount_path(path: str, home: Path, sandboxed: bool = False) -> Path:
    """Where a file mount lands: `~` is the node's home. A sandboxed node (the local cloud, a process on
    the user's machine) puts absolute paths under its home too: `/data` lands at `<home>/data`."""
    if path == "~" or path.startswith("~/"):
        return home / path[2:]
    if os.path.isabs(path):
        return home / path.lstrip("/") if sandboxed else Path(path)
    return home / path


def unpack_mount(data: bytes, target: Path) -> None:
    """A tarball of one regular file is that file at `target`; any other tarball is a folder at `target`."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        members = archive.getmembers()
        if len(members) == 1 and members[0].isfile():
            source = archive.extractfile(members[0])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read() if source else b"")
            return
        target.mkdir(parents=True, exist_ok=True)
        safe_extract(archive, target)


def fetch_file_mounts(mounts: list[dict[str, Any]], home: Path, sandboxed: bool = False) -> list[str]:
    """Fetch each mount to its path; answer a note for each absolute path a sandbox moved."""
    notes = []
    for mount in mounts or []:
        target = mount_path(mount["path"], home, sandboxed)
        if sandboxed and os.path.isabs(mount["path"]):
            notes.append(f"skyless: file mount {mount['path']} is at {target} on the local cloud\n")
        data = download(mount["url"])
        if mount.get("archive"):
            unpack_mount(data, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return notes
