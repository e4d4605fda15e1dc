"""`import skyless` as a notebook user scripts it, from a fresh HOME whose only setting is SkyPilot's
`~/.sky/config.yaml`: a Task from YAML and one built in code (its workdir and a local file mount uploaded
for them), launch, tail_logs, exec, queue, status, cancel, cost_report, stop, start, down, on the local
runtime the first call starts. The script runs in its own Python process, as a notebook kernel would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]

NOTEBOOK = textwrap.dedent(
    """
    import io, json, time
    import skyless

    results = {}
    task = skyless.Task.from_yaml("examples/dev_cluster.yaml")
    job_id, handle = skyless.launch(task, cluster_name="dev")
    results["launch"] = [job_id, handle.cluster_name, handle.action, handle.notes]
    log = io.StringIO()
    results["first_exit"] = skyless.tail_logs("dev", job_id, output_stream=log)
    results["first_log"] = log.getvalue()

    project = WORK / "project"
    project.mkdir()
    (project / "train.py").write_text("import os; print('training in', os.getcwd().endswith('sky_workdir'))")
    (WORK / "notes.txt").write_text("mounted notes\\n")
    built = skyless.Task(name="built", run="python3 train.py; cat ~/inputs/notes.txt; echo EPOCHS=$EPOCHS",
                         workdir=str(project), envs={"EPOCHS": 3},
                         file_mounts={"~/inputs/notes.txt": str(WORK / "notes.txt")})
    built.set_resources(skyless.Resources(cpus="2+"))
    second = skyless.exec(built, "dev")
    log = io.StringIO()
    results["second_exit"] = skyless.tail_logs("dev", second.job_id, output_stream=log)
    results["second_log"] = log.getvalue()

    sleeper = skyless.exec("echo sleeping; sleep 300", "dev")
    for _ in range(120):
        if [j.status for j in skyless.queue("dev") if j.job_id == sleeper.job_id] == ["RUNNING"]:
            break
        time.sleep(0.5)
    results["cancelled"] = skyless.cancel("dev", job_ids=[sleeper.job_id])
    results["cancel_exit"] = skyless.tail_logs("dev", sleeper.job_id, output_stream=io.StringIO())
    results["queue"] = [[j.job_id, j.job_name, j.status] for j in skyless.queue("dev")]
    results["unfinished"] = [j.job_id for j in skyless.queue("dev", skip_finished=True)]
    status = skyless.get(skyless.status())
    results["status"] = [[c.name, c.status, c.cloud, c.num_nodes, c.autostop, type(c).__name__]
                         for c in status]
    results["cost"] = [[e.name, e.kind, e.cost >= 0] for e in skyless.cost_report()]
    try:
        skyless.Task(run="x", resources=skyless.Resources(accelerators="A100:many"))
    except skyless.UserError as error:
        results["bad_field"] = error.field
    try:
        skyless.queue("no-such-cluster")
    except skyless.UserError as error:
        results["unknown_cluster"] = [type(error).__name__, getattr(error, "status_code", None)]
    def wait_for(state):
        for _ in range(120):
            if [c.status for c in skyless.status("dev")] == [state]:
                return state
            time.sleep(0.5)
        return [c.status for c in skyless.status("dev")]

    results["stop"] = [skyless.stop("dev").status, wait_for("STOPPED")]
    results["start"] = [skyless.start("dev", idle_minutes_to_autostop=45).autostop, wait_for("UP")]
    nodes = (Path.home() / ".skyless" / "local" / "nodes").glob("*/*/node.json")
    results["labels"] = [json.loads(p.read_text())["hardware"]["labels"] for p in nodes]
    results["down"] = skyless.down("dev").status
    print("RESULT " + json.dumps(results))
    """
)


def test_a_notebook_drives_a_cluster_through_the_sdk(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".sky").mkdir(parents=True)
    (home / ".sky" / "config.yaml").write_text(
        "allowed_clouds: [gcp]\ngcp:\n  labels: {team: ml}\njobs:\n  controller:\n    resources: {cpus: 4+}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_", "SKYPILOT_"))}
    env.update(HOME=str(home), SKYLESS_LOCAL_MOTO_PORT=str(free_port()),
               SKYLESS_LOCAL_API_PORT=str(free_port()), SKYLESS_CLUSTER_POLL_SECONDS="0.5",
               SKYLESS_LOG_FLUSH_SECONDS="0.5")  # fmt: skip
    script = f"from pathlib import Path\nWORK = Path({str(tmp_path)!r})\n" + NOTEBOOK
    try:
        done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=240, check=False)  # fmt: skip
        log = home / ".skyless" / "local" / "runtime.log"
        assert done.returncode == 0, (
            f"{done.stdout}\n{done.stderr}\n{log.read_text()[-3000:] if log.exists() else ''}"
        )
    finally:
        subprocess.run([str(Path(sys.executable).with_name("skyless")), "local", "down"], env=env, cwd=ROOT,
                       capture_output=True, timeout=60, check=False)  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    results = json.loads(line.removeprefix("RESULT "))

    job_id, cluster, action, notes = results["launch"]
    assert (job_id, cluster, action) == (1, "dev", "created")
    assert any("allowed_clouds: applied: only gcp considered" in note for note in notes), notes
    assert "jobs.controller: read, not applied: skyless has no controller VM" in done.stderr
    assert results["first_exit"] == 0 and "hello from" in results["first_log"], results
    assert results["second_exit"] == 0
    assert "training in True" in results["second_log"], results  # the workdir was uploaded and is the cwd
    assert "mounted notes" in results["second_log"] and "EPOCHS=3" in results["second_log"], results
    assert results["cancelled"] == [3] and results["cancel_exit"] == 103
    assert results["queue"] == [[3, None, "CANCELLED"], [2, "built", "SUCCEEDED"], [1, "dev", "SUCCEEDED"]]
    assert results["unfinished"] == []
    assert results["status"] == [["dev", "UP", "gcp", 1, 30, "ClusterStatus"]], results
    assert ["dev", "cluster", True] in results["cost"]
    assert results["bad_field"] == "resources.accelerators"
    assert results["unknown_cluster"][0] in ("ApiError", "NotFoundError")
    assert results["stop"][1] == "STOPPED" and results["start"] == [45, "UP"], results
    assert results["down"] in ("TERMINATING", "TERMINATED")
    labels = results["labels"]
    assert labels and all(label.get("team") == "ml" for label in labels), labels  # gcp.labels reached the VM
