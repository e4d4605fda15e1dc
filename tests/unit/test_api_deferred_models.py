"""The API's bodies are built on first use: a cold start builds only those of the route it serves."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from shared.api.deferred_model import DeferredModel

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_api_builds_no_body_model_and_every_one_builds_on_use() -> None:
    code = (
        "import inspect, sys\n"
        "import functions.submit.app, pkgutil, importlib, shared.api\n"
        "for found in pkgutil.iter_modules(shared.api.__path__):\n"
        "    importlib.import_module(f'shared.api.{found.name}')\n"
        "from shared.api.deferred_model import DeferredModel\n"
        "models = [m for n, mod in list(sys.modules.items()) if n.startswith('shared.api.')\n"
        "          for m in vars(mod).values()\n"
        "          if inspect.isclass(m) and issubclass(m, DeferredModel) and m is not DeferredModel]\n"
        "print(len(models), sum(m.__pydantic_complete__ for m in models))\n"
        "for m in models:\n"
        "    m.model_json_schema()\n"
        "print(sum(m.__pydantic_complete__ for m in models))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    counts, built_after = done.stdout.splitlines()
    models, built_at_import = map(int, counts.split())
    assert models > 50 and built_at_import == 0
    assert int(built_after) == models


def test_a_deferred_model_first_used_on_many_threads_at_once_validates_each_body_as_itself() -> None:
    class Base(DeferredModel):
        name: str

    class Child(Base):
        size: int

    barrier = threading.Barrier(12)
    answers: list[object] = []

    def first_use(index: int) -> None:
        barrier.wait()
        try:
            answers.append(Child.model_validate({"name": f"n{index}", "size": index}))
        except Exception as exc:
            answers.append(exc)

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.size for a in answers if isinstance(a, Child)) == list(range(12)), answers
