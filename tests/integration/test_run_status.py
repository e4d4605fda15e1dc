"""runs/<job>/status.json: written at submission, rewritten from the events stream when the job ends."""

from __future__ import annotations

import json

from functions.submit.handler import handler as submit_handler
from local_runtime.events_stream import EventsStreamReader
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.run_status import status_key, write_run_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.wiring import wiring_for

TASK = "name: s\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo\n"


def status_of(settings: Settings, job_id: str) -> dict[str, object]:
    return json.loads(wiring_for(settings).objects.get_text(status_key(job_id)) or "{}")  # type: ignore[no-any-return]


def test_a_job_that_ends_gets_its_final_status_beside_its_logs_keeping_its_source(stack: Settings) -> None:
    reader = EventsStreamReader(stack)
    job = submit_job(wiring_for(stack), SubmitJob.from_text(owner="u-1", task_text=TASK))
    write_run_status(stack, job.job_id, job.state, source={"key": "tasks/u-1/s.yaml"})
    other = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner="u-1", task_text=TASK)
    )  # still running: no final status
    cancel_job(wiring_for(stack), job.job_id, owner="u-1")
    records = reader.poll()
    assert records and submit_handler({"Records": records}, None) == {"batchItemFailures": []}
    submit_handler({"Records": records}, None)  # redelivered: the same answer
    status = status_of(stack, job.job_id)
    assert status["state"] == "CANCELLED" and status["finished_at"]
    assert status["source"] == {"key": "tasks/u-1/s.yaml"}
    assert status_of(stack, other.job_id) == {}
