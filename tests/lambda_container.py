"""A Lambda container, as far as Python sees one: run as a fresh process with the function's CodeUri folder
first on sys.path and the template's environment, it imports the `Handler` string the way Lambda's
bootstrap does (module path + attribute) and invokes it with each event in turn.

It also records every AWS call the code makes (a botocore `provide-client-params` hook on every client,
presigned URLs and POSTs included, since their holders act with the function's rights), so a test can
compare them with the function's IAM policy.

    python tests/lambda_container.py CODE_ROOT HANDLER EVENTS.json ANSWERS.json
EVENTS.json is a list of events; ANSWERS.json gets {"answers": [...], "calls": [...], "modules": {...}}.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

_recording = threading.local()


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return f"<{type(value).__name__}>"  # bodies, streams: their content says nothing about rights


def install_call_recorder(calls: list[dict[str, Any]]) -> None:
    import botocore.session
    import botocore.signers

    def on_params(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if getattr(_recording, "inside_presigned_post", False):
            return  # recorded by the wrapper below with the key it is for
        calls.append(
            {
                "service": model.service_model.endpoint_prefix,
                "signing_name": model.service_model.signing_name,
                "operation": model.name,
                "params": _jsonable(params),
                "presigned": bool(context.get("is_presign_request")),
            }
        )

    def on_created(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        """What a create call made, so later calls on it can be judged by the tags it was given."""
        if model.name == "RunInstances":
            made = [i["InstanceId"] for i in parsed.get("Instances", [])]
        elif model.name == "CreateSecurityGroup" and "GroupId" in parsed:
            made = [parsed["GroupId"]]
        else:
            return
        for call in reversed(calls):
            if call["operation"] == model.name and "created" not in call:
                call["created"] = made
                return

    original_create_client = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original_create_client(self, *args, **kwargs)
        client.meta.events.register("provide-client-params", on_params)
        client.meta.events.register("after-call.ec2", on_created)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]

    original_post = botocore.signers.generate_presigned_post

    def generate_presigned_post(self: Any, Bucket: str, Key: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(
            {
                "service": "s3",
                "signing_name": "s3",
                "operation": "PutObject",
                "params": {"Bucket": Bucket, "Key": Key.replace("${filename}", "*")},
                "presigned": True,
            }
        )
        _recording.inside_presigned_post = True
        try:
            return original_post(self, Bucket, Key, *args, **kwargs)
        finally:
            _recording.inside_presigned_post = False

    botocore.signers.generate_presigned_post = generate_presigned_post


class LambdaContext:
    function_name = "skyless-test"
    memory_limit_in_mb = 512
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def main(code_root: str, handler_name: str, events_path: str, answers_path: str) -> int:
    sys.path[0] = code_root  # /var/task: where Lambda's bootstrap finds the handler's module
    calls: list[dict[str, Any]] = []
    install_call_recorder(calls)
    module_name, _, attribute = handler_name.rpartition(".")
    handler = getattr(importlib.import_module(module_name), attribute)
    answers = []
    for event in json.loads(Path(events_path).read_text()):
        answers.append(handler(event, LambdaContext()))
    modules = {
        name: getattr(module, "__file__", None)
        for name, module in sys.modules.items()
        if name.split(".")[0]
        in ("functions", "shared", "node_agent", "local_runtime", "cli", "moto", "tests")
    }
    Path(answers_path).write_text(json.dumps({"answers": answers, "calls": calls, "modules": modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
