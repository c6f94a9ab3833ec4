"""Cross-check: run the runtime-test inputs through upstream Trainer v2.1.0 and through ours.

Not part of the test suite (it needs Go and the module proxy). It builds ``main.go`` (a
harness that calls upstream ``core.New(...).NewObjects`` on a fake client), feeds it every
``inputs_*`` scenario of the NewObjects, framework and shipped-runtime tests, and prints
SAME/DIFF per scenario with the differing paths. Generated SSH keys are masked.

    cd test/unit/runtime/testdata/upstream_check && go build -o /tmp/trainer-upstream . && cd -
    .venv/bin/python test/unit/runtime/testdata/upstream_check/compare.py /tmp/trainer-upstream
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent.parent
sys.path.insert(0, str(TESTS))

from runtime_fixtures import FakeReader, RecordingIndexer, sort_objects  # noqa: E402

from trainer.runtime.errors import RuntimeFailure  # noqa: E402
from trainer.runtime.registry import new_runtimes  # noqa: E402

Json = dict[str, Any]
MODULES = ("test_runtime_new_objects.py", "test_runtime_framework.py", "test_runtime_shipped.py")


def scenarios() -> list[tuple[str, Json, Json]]:
    out = []
    for file in MODULES:
        spec = importlib.util.spec_from_file_location(file[:-3], TESTS / file)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in sorted(dir(module)):
            if name.startswith("inputs_") and name not in ("inputs_e12", "inputs_d4_baseline"):
                runtime, trainjob = getattr(module, name)()
                out.append((f"{file}:{name}", runtime, trainjob))
    return out


def masked(objects: Any) -> Any:
    if objects is None:  # Go marshals an empty (nil) object list as null
        return []
    if not isinstance(objects, list):
        return objects
    objects = sort_objects(copy.deepcopy(objects))
    for obj in objects:
        if obj.get("kind") == "Secret":
            obj["data"] = dict.fromkeys(obj.get("data", {}), "<key>")
    return objects


def ours(runtime: Json, trainjob: Json, existing: list[Json] | None = None) -> Any:
    async def build() -> Any:
        runtimes = await new_runtimes(FakeReader([runtime, *(existing or [])]), RecordingIndexer())
        key = f"{trainjob['spec']['runtimeRef']['kind']}.trainer.kubeflow.org"
        return await runtimes[key].new_objects(trainjob)

    try:
        return masked(asyncio.run(build()))
    except RuntimeFailure as failure:
        return {"error": failure.message}


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if type(a) is not type(b):
        return [f"{path}: ours={json.dumps(a)[:160]} upstream={json.dumps(b)[:160]}"]
    if isinstance(a, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{path}.{key}: only in {'upstream' if key not in a else 'ours'}")
            else:
                out += differences(a[key], b[key], f"{path}.{key}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items in ours, {len(b)} upstream"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: ours={a!r} upstream={b!r}"]


def main(binary: str) -> int:
    cases = scenarios()
    stdin = "".join(json.dumps({"runtime": r, "trainjob": t, "existing": []}) + "\n" for _, r, t in cases)
    lines = subprocess.run(
        [binary], input=stdin, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    failed = 0
    for (name, runtime, trainjob), line in zip(cases, lines, strict=True):
        diff = differences(ours(runtime, trainjob), masked(json.loads(line)))
        print(("DIFF " if diff else "SAME ") + name)
        for item in diff:
            print("   ", item)
        failed += bool(diff)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
