"""The commands a real VM runs to mount a bucket with rclone (pure: strings for the node agent).

Why rclone: one tool for every store skyless reaches (S3, R2, GCS, Azure Blob), a VFS
write-back cache that is exactly MOUNT_CACHED (SkyPilot itself uses rclone for that mode), POSIX enough
for checkpoint writers that overwrite and rename files (mountpoint-s3 refuses overwrites and renames by
default; gcsfuse is GCS only), a single static binary, and credentials the agent can refresh in place:
on S3 through the AWS SDK chain (`credential_process`), on GCS and Azure through rclone's own config file
(a downscoped OAuth token; a container SAS URL), written by the agent from `credentials_template`.

COPY from GCS or Azure is `rclone copyto` before setup (the S3 path copies with the agent's own client).
MOUNT is `--vfs-cache-mode writes` (files are uploaded when closed); MOUNT_CACHED is `--vfs-cache-mode full`
with a 5 s write-back (tunable with the storage object's `config.mount_cached`). Before the node lets go
(job end, preemption notice) the agent runs `flush`, which waits until rclone's upload queue is empty.
"""

from __future__ import annotations

import shlex
from typing import Any

RC_BASE_PORT = 5572
CONFIG_REMOTES = ("gcs", "azure")  # stores whose credentials rclone reads from its own config file
GCS_API = "https://storage.googleapis.com"
FLUSH_SECONDS = 600
MOUNT_WAIT_SECONDS = 60
OPTION_FLAGS = {
    "transfers": "--transfers",
    "buffer_size": "--buffer-size",
    "vfs_cache_max_size": "--vfs-cache-max-size",
    "vfs_cache_max_age": "--vfs-cache-max-age",
    "vfs_read_ahead": "--vfs-read-ahead",
    "vfs_read_chunk_size": "--vfs-read-chunk-size",
    "vfs_read_chunk_streams": "--vfs-read-chunk-streams",
    "vfs_write_back": "--vfs-write-back",
}
_QUEUE_EMPTY = (
    "import json,sys; c=json.load(sys.stdin).get('diskCache') or {}; "
    "sys.exit(0 if c.get('uploadsInProgress', 0) + c.get('uploadsQueued', 0) == 0 else 1)"
)


def remote_of(entry: dict[str, Any]) -> str:
    """rclone's name for the entry's bucket and prefix: an S3 connection string (no config file needed),
    or the `skyless` remote of the config file the agent writes for GCS and Azure."""
    path = entry["bucket"] + (f"/{entry['prefix']}" if entry.get("prefix") else "")
    if entry.get("api") in CONFIG_REMOTES:
        return f"skyless:{path}"
    if entry.get("api") != "s3":
        raise ValueError(f"rclone mounts are generated for S3, GCS and Azure, not {entry.get('api')}")
    params = ["env_auth=true", f"region={entry['region']}"]
    if entry.get("store") == "r2":
        params.insert(0, "provider=Cloudflare")
        params.append(f"endpoint='{entry['endpoint']}'")
    else:
        params.insert(0, "provider=AWS")
    return f":s3,{','.join(params)}:{path}"


def config_template(entry: dict[str, Any]) -> str:
    """rclone's config for a GCS or Azure entry, with `${...}` where the agent puts the credentials."""
    if entry["api"] == "azure":
        return "[skyless]\ntype = azureblob\nsas_url = ${sas_url}\n"
    lines = ["[skyless]", "type = gcs", "bucket_policy_only = true", "no_check_bucket = true"]
    if entry.get("endpoint") and entry["endpoint"] != GCS_API:
        lines.append(f"endpoint = {entry['endpoint']}")
    lines.append('token = {"access_token":"${access_token}","token_type":"Bearer","expiry":"${expiration}"}')
    return "\n".join(lines) + "\n"


def rclone_commands(
    entry: dict[str, Any], index: int, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """{env, credentials_file, mount, flush, unmount}: bash scripts run by the agent as the task's user.

    `credentials_file` is where the agent keeps the node's credentials: S3's in `credential_process`
    JSON (`env` points the AWS SDK inside rclone at it); GCS's and Azure's as rclone's config file,
    filled from `credentials_template` (`env` names it RCLONE_CONFIG)."""
    options = dict(options or {})
    target = entry["path"]
    target_shell = "$HOME/" + target[2:] if target.startswith("~/") else shlex.quote(target)
    state = f"$HOME/.skyless/storage/{index}"
    port = RC_BASE_PORT + index
    cache_mode = (
        ["--vfs-cache-mode", "full", "--vfs-write-back", "5s"]
        if entry["mode"] == "MOUNT_CACHED"
        else [
            "--vfs-cache-mode",
            "writes",
        ]
    )
    flags = [*cache_mode, "--dir-cache-time", "5s"]
    for key, flag in OPTION_FLAGS.items():
        if key in options:
            flags += [flag, str(options[key])]
    if options.get("read_only") or not entry.get("write_back", True):
        flags.append("--read-only")
    flags_text = " ".join(shlex.quote(f) for f in flags)
    sudo = 'SUDO=$([ "$(id -u)" = 0 ] || echo sudo)'
    mount = "\n".join(
        [
            "set -eu",
            sudo,
            "command -v rclone >/dev/null 2>&1 || curl -fsSL https://rclone.org/install.sh | $SUDO bash",
            "command -v fusermount3 >/dev/null 2>&1 || command -v fusermount >/dev/null 2>&1 || "
            "$SUDO apt-get install -y -q fuse3",
            f'$SUDO mkdir -p {target_shell} && $SUDO chown "$(id -u):$(id -g)" {target_shell}',
            f"mkdir -p {state}/cache",
            # not --daemon: rclone 1.60's daemon binds the rc port in the parent, and the child then cannot
            f"setsid rclone mount {shlex.quote(remote_of(entry))} {target_shell} "
            f"{flags_text} --cache-dir {state}/cache --rc --rc-addr 127.0.0.1:{port} --rc-no-auth "
            f"--log-file {state}/rclone.log </dev/null >/dev/null 2>&1 &",
            f"for i in $(seq 1 {MOUNT_WAIT_SECONDS}); do "
            f"mountpoint -q {target_shell} && exit 0; sleep 1; done",
            f"echo 'rclone did not mount {entry['path']}:' >&2; tail -5 {state}/rclone.log >&2; exit 1",
        ]
    )
    flush = (
        f"for i in $(seq 1 {FLUSH_SECONDS}); do "
        f"rclone rc --url http://127.0.0.1:{port}/ vfs/stats 2>/dev/null "
        f"| python3 -c {shlex.quote(_QUEUE_EMPTY)} "
        "&& exit 0; sleep 1; done; exit 1"
    )
    unmount = (
        f"fusermount3 -uz {target_shell} 2>/dev/null || fusermount -uz {target_shell} 2>/dev/null "
        f"|| umount -l {target_shell}"
    )
    if entry.get("api") not in CONFIG_REMOTES:
        return {
            "env": {
                "AWS_CONFIG_FILE": f"{state}/aws-config",
                "AWS_PROFILE": f"skyless-{index}",
                "AWS_SDK_LOAD_CONFIG": "1",
            },
            "credentials_file": f"{state}/credentials.json",
            "mount": mount,
            "flush": flush,
            "unmount": unmount,
        }
    if entry["mode"] == "COPY":
        copy = (  # copyto: a prefix lands as a folder, one object as that file
            f'$SUDO env "RCLONE_CONFIG=$RCLONE_CONFIG" rclone copyto {shlex.quote(remote_of(entry))} '
            f'{target_shell} --log-file {state}/rclone.log\n$SUDO chown -R "$(id -u):$(id -g)" {target_shell}'
        )
        mount = "\n".join([*mount.split("\n")[:3], f"mkdir -p {state}", copy])
        flush = unmount = "true"
    return {
        "env": {"RCLONE_CONFIG": f"{state}/rclone.conf"},
        "credentials_file": f"{state}/rclone.conf",
        "credentials_template": config_template(entry),
        "mount": mount,
        "flush": flush,
        "unmount": unmount,
    }
