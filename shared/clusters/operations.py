"""What users do to named clusters (the API and the CLI call these): `launch -c`, `exec`, `cancel` here;
`stop`, `start`, `down`, `autostop` in power.py (and named here too). Each is a conditional write (the
decision) and, when the cloud must act, one queue message (provisioning.py acts on it).

`launch -c NAME` as SkyPilot: provision when NAME is new (or was torn down), reuse it when UP (its setup runs
again unless `fast`), start it when STOPPED; in every case the task is queued as a job of the cluster.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from shared.clusters.autostop import autostop_of_task
from shared.clusters.job_queue import cancel_jobs, check_job_fits, queue_job
from shared.clusters.messages import send_cluster_step
from shared.clusters.names import check_cluster_name, new_cluster_key
from shared.clusters.power import (
    down_cluster,
    find_cluster,
    request_start,
    set_autostop,
    start_cluster,
    stop_cluster,
    write_autostop,
)
from shared.clusters.states import ACCEPTS_EXEC, ACCEPTS_JOBS, ClusterState
from shared.clusters.stopping import STOP_HINT, stop_refusal
from shared.clusters.tokens import cluster_token_hash
from shared.config import Settings
from shared.errors import ConflictError, NotFoundError, TaskFileError, UserError
from shared.jobs.file_mounts import check_file_mounts
from shared.storage.access import StorageWalls
from shared.store.cluster_records import ClusterJobModel, ClusterStore, NamedClusterModel
from shared.wiring import Wiring, wiring_for

__all__ = [  # the verbs (start, stop, down and autostop are in power.py)
    "LaunchOutcome",
    "cancel_cluster_jobs",
    "down_cluster",
    "exec_on_cluster",
    "find_cluster",
    "launch_on_cluster",
    "set_autostop",
    "start_cluster",
    "stop_cluster",
]
ATTEMPTS_ON_RACE = 5
MAX_PLAN_CANDIDATES = 16


@dataclass(frozen=True)
class LaunchOutcome:
    cluster: NamedClusterModel
    job: ClusterJobModel
    action: str  # "created" | "reused" | "starting" | "provisioning"
    notes: tuple[str, ...] = ()  # where skyless does not do what SkyPilot would with this task


def skypilot_differences(task: Any) -> list[str]:
    """What of a cluster task skyless reads but does not act on, said at launch."""
    notes = []
    raw = task.resources.autostop
    if raw is not None and not isinstance(raw, bool | int | str):
        if raw.wait_for not in (None, "jobs_and_ssh"):
            notes.append(
                f"autostop.wait_for: {raw.wait_for} is not honoured: idle means no job and no open shell"
            )
        if raw.hook is not None:
            notes.append("autostop.hook is not run before the cluster stops")
    return notes


def refuse_task_buckets(pipeline: Any, *, filename: str) -> None:
    """Buckets named in `file_mounts` (storage objects, gs://, r2://, other s3:// buckets) are mounted for
    managed jobs (shared/storage), not yet on named clusters: refused, naming the field, never dropped."""
    for path, source in (pipeline.tasks[0].file_mounts or {}).items():
        if not isinstance(source, str) or (
            "://" in source and not source.lower().startswith(("https://", "http://"))
        ):
            raise UserError(
                "buckets are mounted for managed jobs, not yet on named clusters",
                file=filename,
                field=f"file_mounts.{path}",
                hint="launch it as a managed job (no -c), or copy what it needs in `setup`",
            )


def refuse_containers(pipeline: Any, *, filename: str, text: str) -> None:
    """`image_id: docker:...` runs `setup` and `run` in a container for managed jobs (shared/jobs/containers);
    a cluster's agent runs jobs on the node's own OS, so such a task is refused here, naming the field."""
    from shared.task.container_image import container_image
    from shared.task.loader import task_field_line

    task = pipeline.tasks[0]
    alternatives = [*(task.resources.any_of or ()), *(task.resources.ordered or ())]
    clouds = {None, *(alternative.location()[0] for alternative in alternatives)}
    if any(container_image(task, cloud=cloud) is not None for cloud in clouds):
        raise TaskFileError(
            "containers (image_id: docker:...) run for managed jobs, not yet on named clusters",
            file=filename,
            line=task_field_line(text, 0, ("resources", "image_id")),
            field="resources.image_id",
            hint="launch it as a managed job (no -c), or give a machine image",
        )


def load_single_task(
    text: str, *, filename: str, env: dict[str, str] | None, secrets: dict[str, str] | None
) -> Any:
    from shared.task.loader import load_pipeline

    pipeline = load_pipeline(text, filename=filename, env_overrides=env or {}, secret_overrides=secrets or {})
    if len(pipeline.tasks) != 1:
        raise UserError(
            f"a cluster runs one task at a time; this file holds {len(pipeline.tasks)}",
            file=filename,
            hint="run a pipeline with `skyless launch FILE` (no -c)",
        )
    return pipeline


def launch_on_cluster(
    settings: Settings,
    *,
    owner: str,
    name: str,
    task_text: str,
    filename: str = "task.yaml",
    env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    minimize: str = "cost",
    clouds: list[str] | None = None,
    workdir_key: str | None = None,
    file_mount_keys: dict[str, str] | None = None,
    fast: bool = False,
    idle_minutes: int | None = None,
    down: bool | None = None,
) -> LaunchOutcome:
    check_cluster_name(name)
    pipeline = load_single_task(task_text, filename=filename, env=env, secrets=secrets)
    task = pipeline.tasks[0]
    keys = file_mount_keys or {}
    check_file_mounts(pipeline, keys, owner=owner, walls=StorageWalls.of(settings), filename=filename,
                      text=task_text)  # fmt: skip
    refuse_task_buckets(pipeline, filename=filename)
    refuse_containers(pipeline, filename=filename, text=task_text)
    wiring, store = _store(settings)
    autostop = _autostop_wanted(task, idle_minutes, down)
    for _ in range(ATTEMPTS_ON_RACE):
        claim = store.claim(owner, name)
        cluster = store.get(claim.cluster_key) if claim is not None else None
        if cluster is None or cluster.state == ClusterState.TERMINATED:
            replacing = claim.cluster_key if claim is not None else None
            created = _create(
                wiring, store, owner, name, pipeline, filename, minimize, clouds, autostop, replacing
            )
            if created is None:
                continue  # someone else claimed the name meanwhile: use theirs
            cluster, action = created, "created"
        else:
            reused = _reuse(wiring, store, cluster, task, filename)
            if reused is None:
                continue
            action = reused
            cluster = store.get(cluster.key) or cluster
            if autostop is not None:
                cluster = write_autostop(wiring, store, cluster, *autostop)
        job = queue_job(
            wiring,
            store,
            cluster,
            owner=owner,
            pipeline=pipeline,
            with_setup=not fast,
            workdir_key=workdir_key,
            file_mount_keys=keys,
            accepting=ACCEPTS_JOBS,
        )
        applied = "resources.autostop:"  # a managed job's note; a named cluster applies autostop
        notes = (*skypilot_differences(task), *(n for n in task.unsupported if not n.startswith(applied)))
        return LaunchOutcome(store.get(cluster.key) or cluster, job, action, notes)
    raise ConflictError(f"cluster {name} kept changing; try again", field="cluster")


def _autostop_wanted(task: Any, idle_minutes: int | None, down: bool | None) -> tuple[int, bool] | None:
    """`-i`/`--down` win over the task's `resources.autostop` (as in SkyPilot)."""
    from_task = autostop_of_task(task)
    if idle_minutes is None and down is None:
        return from_task
    minutes = idle_minutes if idle_minutes is not None else (from_task[0] if from_task else 5)
    return int(minutes), bool(down) if down is not None else bool(from_task and from_task[1])


def _create(
    wiring: Wiring,
    store: ClusterStore,
    owner: str,
    name: str,
    pipeline: Any,
    filename: str,
    minimize: str,
    clouds: list[str] | None,
    autostop: tuple[int, bool] | None,
    replacing: str | None,
) -> NamedClusterModel | None:
    from shared.optimizer import plan_pipeline

    enabled = {c.lower() for c in clouds} if clouds else None
    served = wiring.providers.served_clouds()
    if served is not None:
        enabled = served if enabled is None else enabled & served
    try:
        plan = plan_pipeline(pipeline, wiring.catalog, enabled_clouds=enabled, minimize=minimize)
    except UserError as error:
        error.file = error.file or filename
        raise
    del plan.tasks[0].candidates[MAX_PLAN_CANDIDATES:]
    minutes, down = autostop if autostop is not None else (-1, False)
    chosen = plan.tasks[0].chosen
    if minutes >= 0 and not down and (refusal := _cloud_refusal(wiring, chosen.cloud, chosen.use_spot)):
        raise UserError(f"autostop would stop the cluster, but {refusal}", field="autostop", hint=STOP_HINT)
    key = new_cluster_key()
    data = pipeline.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["tasks"][0].pop("secrets", None)
    cluster = store.new_cluster(
        key=key,
        owner=owner,
        name=name,
        state=ClusterState.INIT.value,
        pending_op="launch",
        incarnation=0,
        num_nodes=int(pipeline.tasks[0].num_nodes or 1),
        token_hash=cluster_token_hash(wiring.settings, key),
        autostop_minutes=minutes,
        autostop_down=down,
        nodes={},
        active={},
    )
    plan_item = store.new_plan(
        key,
        plan_z=zlib.compress(plan.to_json().encode()),
        task=json.dumps(data, separators=(",", ":")),
        minimize=minimize,
        clouds=json.dumps(sorted(enabled)) if enabled else None,
    )
    claim = store.new_claim(owner, name, key)
    text = f"INIT: launching {name} from {filename}"
    if not store.create(cluster, plan_item, claim, replacing=replacing, message=text):
        return None
    send_cluster_step(wiring, key, "launch", incarnation=0)
    return cluster


def _cloud_refusal(wiring: Wiring, cloud: str, use_spot: bool) -> str | None:
    try:
        provider = wiring.providers.provider_for(cloud)
    except UserError:
        return None
    except Exception:
        return None
    return stop_refusal(cloud, use_spot, provider)


def _reuse(
    wiring: Wiring, store: ClusterStore, cluster: NamedClusterModel, task: Any, filename: str
) -> str | None:
    """What `launch -c` does with an existing cluster; None when it moved under us (read again)."""
    state = ClusterState(cluster.state)
    if state in (ClusterState.STOPPING, ClusterState.TERMINATING):
        raise ConflictError(
            f"cluster {cluster.name} is {state.value}",
            field="cluster",
            hint="wait until it is STOPPED (then `launch -c` starts it) or gone (then it is made anew)",
        )
    if state == ClusterState.INIT:
        return "provisioning"  # its job is queued and runs once the cluster is UP
    check_launch_fits(wiring, cluster, task, filename)
    if state == ClusterState.UP:
        return "reused"
    return "starting" if request_start(wiring, store, cluster) else None


def check_launch_fits(wiring: Wiring, cluster: NamedClusterModel, task: Any, filename: str) -> None:
    """SkyPilot's check on an existing cluster: the task's resources must be met by the cluster's."""
    from shared.optimizer import plan_task

    check_job_fits(cluster, task)
    place = f"{cluster.cloud}/{cluster.region} {cluster.instance_type}" + (
        " (spot)" if cluster.use_spot else ""
    )
    requested_spot = task.resources.use_spot
    if requested_spot is not None and bool(requested_spot) != bool(cluster.use_spot):
        raise UserError(
            f"the task asks for use_spot: {str(requested_spot).lower()}; cluster {cluster.name} is {place}",
            file=filename,
            field="resources.use_spot",
        )
    try:
        candidates = plan_task(
            task.resource_choice(),
            1,
            wiring.catalog,
            enabled_clouds={str(cluster.cloud)},
            max_candidates=None,
        )
    except UserError:
        candidates = []
    fits = any(c.region == cluster.region and c.instance_type == cluster.instance_type for c in candidates)
    if not fits:
        raise UserError(
            f"the task's resources are not met by cluster {cluster.name} ({place})",
            file=filename,
            field="resources",
            hint="launch it on another cluster name, or `skyless down` this one first",
        )


def exec_on_cluster(
    settings: Settings,
    *,
    owner: str,
    name: str,
    task_text: str | None = None,
    command: str | None = None,
    filename: str = "task.yaml",
    env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    workdir_key: str | None = None,
    file_mount_keys: dict[str, str] | None = None,
) -> ClusterJobModel:
    """Queue a job on an UP cluster: no provisioning, no setup (SkyPilot's `exec`)."""
    cluster = find_cluster(settings, owner, name)
    if (task_text is None) == (command is None):
        raise UserError("give either a task file or a command", field="task")
    if command is not None:
        from shared.task.spec import Pipeline

        if not command.strip():
            raise UserError("the command is empty", field="command")
        overrides = env or {}
        pipeline = Pipeline.model_validate({"tasks": [{"run": command, "envs": overrides}]})
    else:
        assert task_text is not None
        pipeline = load_single_task(task_text, filename=filename, env=env, secrets=secrets)
        refuse_containers(pipeline, filename=filename, text=task_text)
    keys = file_mount_keys or {}
    check_file_mounts(pipeline, keys, owner=owner, walls=StorageWalls.of(settings), filename=filename,
                      text=task_text)  # fmt: skip
    refuse_task_buckets(pipeline, filename=filename)
    if cluster.state not in {s.value for s in ACCEPTS_EXEC}:
        raise ConflictError(
            f"cluster {name} is {cluster.state}; exec needs it UP",
            field="cluster",
            hint="`skyless start` a STOPPED cluster; `skyless launch -c` runs setup and waits for INIT",
        )
    check_job_fits(cluster, pipeline.tasks[0])
    wiring, store = _store(settings)
    return queue_job(
        wiring,
        store,
        cluster,
        owner=owner,
        pipeline=pipeline,
        with_setup=False,
        workdir_key=workdir_key,
        file_mount_keys=keys,
        accepting=ACCEPTS_EXEC,
    )


def cancel_cluster_jobs(settings: Settings, *, owner: str, name: str, numbers: list[int] | None) -> list[int]:
    """Cancel jobs of the cluster (None: all live ones); answers the numbers cancelled now. A job that
    already ended is not an error (it is not cancelled again); an unknown number is."""
    wiring, store = _store(settings)
    cluster = find_cluster(settings, owner, name)
    for number in numbers or []:
        if store.job(cluster.key, number) is None:
            raise NotFoundError(f"cluster {name} has no job {number}", field="job")
    return cancel_jobs(wiring, cluster, numbers)


def _store(settings: Settings) -> tuple[Wiring, ClusterStore]:
    return wiring_for(settings), ClusterStore(settings)
