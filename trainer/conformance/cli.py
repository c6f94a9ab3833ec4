"""``trainer-controller-manager conformance [PATH ...]``: compare this manager with the Go originals.

With no kubeconfigs, two full local clusters are started (KWOK nodes): one served by this
manager at the API level ``--level`` (default v2.3, the product's), one by the Go managers of that level (v2.1:
jobset v0.10.1 and trainer v2.1.0; v2.3: jobset v0.12.0 and trainer v2.3.0; built from the Go
module proxy on first use and cached). With ``--kubeconfig-ours/--kubeconfig-theirs`` the runner
only applies and compares on clusters you already run. Every manifest file of the level (its
``# levels:`` header or folder, ``runner.scenario_levels``) is applied in a fresh namespace on
both; every difference is printed with its JSON path. Exit 0 when every difference is a listed
divergence, 1 when one is not, 2 when the comparison could not run: the last line then names the
scenario, the step and the error ("conformance: error after N scenarios, during SCENARIO/STEP:
..."; the traceback above it with --debug or for a bug), after the results of the scenarios that
finished. SIGINT, SIGTERM or SIGHUP stop the run: the clusters are stopped, the results so far
printed, then "conformance: interrupted by SIGINT after N scenarios, during SCENARIO/STEP"; exit
128 + the signal's number (130, 143, 129). A second signal exits at once, without cleanup.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import shutil
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from manager import longrun
from manager.longrun import Progress
from trainer import features, levels
from trainer.conformance import harness, kueue, migrated, originals
from trainer.conformance.diff import DIVERGENCES_FILE, classify, load_divergences
from trainer.conformance.harness import Side
from trainer.conformance.runner import ScenarioResult, Settings, run_scenario, scenario_files
from trainer.levels.check import feature_gate_errors

T = TypeVar("T")

DEFAULT_SCENARIOS = harness.ROOT / "test" / "conformance" / "scenarios"
KUEUE_SCENARIOS = harness.ROOT / "test" / "conformance" / "kueue"
"""The scenarios that need Kueue in front of both sides (``--kueue``): queues, quota, preemption."""
KUEUE_POD_RUN_SECONDS = 300.0
"""KWOK's pod run time with ``--kueue``: every step of a preemption flow sees the pods Running
(``settle: running``); the scenarios delete what runs before their final settle."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="trainer-controller-manager conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths", nargs="*", type=Path, help=f"manifest files or folders (default {DEFAULT_SCENARIOS})"
    )
    p.add_argument(
        "--level",
        choices=sorted(levels.LEVELS),
        default=levels.DEFAULT.name,
        help=f"the API level both sides run and the scenarios are chosen for (default {levels.DEFAULT.name})",
    )
    p.add_argument(
        "--migrate-from",
        choices=sorted({a for a, _ in migrated.MIGRATIONS}),
        help="local clusters: run the scenarios of this level on a cluster of that level, migrate it "
        "(migrate --to <level>, the same on both sides), then start the --level managers on it and "
        "compare what they make of the migrated objects (docs/conformance.md)",
    )
    p.add_argument("--kubeconfig-ours", help="a cluster already served by this manager")
    p.add_argument("--kubeconfig-theirs", help="a cluster already served by the Go managers")
    p.add_argument(
        "--webhook-ours",
        action="append",
        default=[],
        metavar="PATH=URL",
        help="for WebhookRequest documents on an existing cluster: where a webhook path is served",
    )
    p.add_argument("--webhook-theirs", action="append", default=[], metavar="PATH=URL")
    p.add_argument("--webhook-ca-ours", type=Path, help="CA bundle of our webhook server")
    p.add_argument("--webhook-ca-theirs", type=Path, help="CA bundle of their webhook servers")
    p.add_argument(
        "--feature-gates",
        default="",
        metavar="NAME=BOOL,...",
        help="local clusters: feature gates of both sides: ours in its one Configuration, theirs each "
        "in the Configuration of the manager whose gate it is (JobSet's, e.g. RestartJob=true, to the Go "
        "jobset, the others to the Go trainer); TrainJobStatus=true also serves each side's status "
        "server for StatusRequest documents",
    )
    p.add_argument(
        "--kueue",
        action="store_true",
        help="local clusters: Kueue in front of each side (the level's release, trainer.conformance.kueue); "
        f"without paths, the scenarios of {KUEUE_SCENARIOS.relative_to(harness.ROOT)}",
    )
    p.add_argument("--divergences", type=Path, default=DIVERGENCES_FILE, help="listed divergences (YAML)")
    p.add_argument("--quiet-seconds", type=float, default=4.0, help="settled after this long without change")
    p.add_argument("--max-seconds", type=float, default=90.0, help="bound on one settle")
    p.add_argument(
        "--nodes",
        type=int,
        default=4,
        help="KWOK nodes per local cluster (0: no controller-manager, scheduler or KWOK)",
    )
    p.add_argument(
        "--pod-run-seconds",
        type=float,
        default=None,
        help="local clusters: how long KWOK keeps a Job's pod Running before it succeeds "
        f"(default {harness.POD_RUN_SECONDS:g}, with --kueue {KUEUE_POD_RUN_SECONDS:g}; a pod annotated "
        "envtest.trainer.kubeflow.org/pod-run-seconds runs that long; a settle waits for them)",
    )
    p.add_argument("--keep-namespaces", action="store_true", help="leave the scenario namespaces behind")
    p.add_argument("--show-listed", action="store_true", help="also print the listed divergences found")
    p.add_argument(
        "--dump", type=Path, help="write both sides' normalised records here (SCENARIO.ours.json ...)"
    )
    p.add_argument("--keep-workdir", action="store_true", help="keep the managers' logs and configurations")
    p.add_argument("--build-only", action="store_true", help="build the Go originals and exit")
    p.add_argument(
        "--debug", action="store_true", help="print the traceback of an error above its one-line summary"
    )
    args = p.parse_args(argv)
    if args.pod_run_seconds is None:
        args.pod_run_seconds = KUEUE_POD_RUN_SECONDS if args.kueue else harness.POD_RUN_SECONDS
    if args.pod_run_seconds < 0:
        p.error("--pod-run-seconds must be at least 0")
    if bool(args.kubeconfig_ours) != bool(args.kubeconfig_theirs):
        p.error("--kubeconfig-ours and --kubeconfig-theirs go together")
    if args.migrate_from:
        if (args.migrate_from, args.level) not in migrated.MIGRATIONS:
            pairs = ", ".join(f"--migrate-from {a} --level {b}" for a, b in sorted(migrated.MIGRATIONS))
            p.error(f"--migrate-from {args.migrate_from} --level {args.level}: supported: {pairs}")
        if args.kubeconfig_ours:
            p.error("--migrate-from runs on local clusters only (no --kubeconfig-ours/--kubeconfig-theirs)")
        if args.feature_gates:
            p.error("--migrate-from takes no --feature-gates")
    if args.kueue and args.kubeconfig_ours:
        p.error("--kueue runs on local clusters only (no --kubeconfig-ours/--kubeconfig-theirs)")
    if args.kueue and args.migrate_from:
        p.error("--kueue and --migrate-from do not go together")
    try:
        args.feature_gates = _gates(args.feature_gates)
    except ValueError as err:
        p.error(f"--feature-gates: {err}")
    if not args.kubeconfig_ours:  # both sides' managers start here: the gates must be theirs
        errors = features.validate(args.feature_gates)
        errors += feature_gate_errors(levels.get(args.level), frozenset(args.feature_gates))
        if errors:
            p.error(f"--feature-gates: {'; '.join(errors)}")
    return args


def _gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` as a featureGates map."""
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise ValueError(f"{item!r} is not NAME=true or NAME=false")
        gates[name] = value.lower() == "true"
    return gates


def _routes(pairs: list[str]) -> dict[str, str]:
    routes = {}
    for pair in pairs:
        path, sep, url = pair.partition("=")
        if not sep:
            raise SystemExit(f"error: --webhook-* wants PATH=URL, got {pair!r}")
        routes[path] = url
    return routes


async def _in_step(progress: Progress, step: str, work: Coroutine[Any, Any, T]) -> T:
    with progress.step(step):
        return await work


async def _sides(args: argparse.Namespace, workdir: Path | None, progress: Progress) -> tuple[Side, Side]:
    if args.kubeconfig_ours:
        with progress.step("attaching to the clusters"):
            ours = await harness.attach("ours", args.kubeconfig_ours, _routes(args.webhook_ours))
            theirs = await harness.attach("theirs", args.kubeconfig_theirs, _routes(args.webhook_theirs))
        if args.webhook_ca_ours:
            ours.ca_pem = args.webhook_ca_ours.read_bytes()
        if args.webhook_ca_theirs:
            theirs.ca_pem = args.webhook_ca_theirs.read_bytes()
        return ours, theirs
    assert workdir is not None
    level = levels.get(args.level)
    results = await asyncio.gather(
        _in_step(
            progress,
            "starting ours",
            harness.start_ours(
                workdir, args.nodes, args.pod_run_seconds, level=level, feature_gates=args.feature_gates
            ),
        ),
        _in_step(
            progress,
            "starting theirs",
            harness.start_theirs(
                workdir, args.nodes, args.pod_run_seconds, level=level, feature_gates=args.feature_gates
            ),
        ),
        return_exceptions=True,
    )
    started = [r for r in results if isinstance(r, Side)]
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        for side in started:
            await side.stop()
        if len(errors) == 1 or any(isinstance(e, asyncio.CancelledError) for e in errors):
            raise errors[0]
        raise BaseExceptionGroup("neither side started", errors)
    first, second = started  # ours, theirs: gather keeps the order
    if args.kueue:
        try:
            await asyncio.gather(
                _in_step(progress, "starting Kueue (ours)", harness.add_kueue(first, level)),
                _in_step(progress, "starting Kueue (theirs)", harness.add_kueue(second, level)),
            )
        except BaseException:
            await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)
            raise
    return first, second


def dump(directory: Path | None, result: ScenarioResult) -> None:
    """``--dump DIR``: both sides' normalised records of a scenario (``SCENARIO.ours.json``, ...)."""
    if directory is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    for side_name, records in (("ours", result.ours), ("theirs", result.theirs)):
        target = directory / f"{result.name}.{side_name}.json"
        target.write_text(json.dumps(records, indent=1, sort_keys=True))


def exited_processes(sides: list[Side]) -> list[str]:
    """The managers and control-plane processes of ``sides`` that are no longer running."""
    out = []
    for side in sides:
        processes = [*side.processes, *(side.env.processes if side.env else [])]
        for proc in processes:
            code = proc.exited()
            if code is not None:
                out.append(f"{proc.name} ({side.name}) {longrun.exit_status(code)}")
    return out


def report(results: list[ScenarioResult], divergence_file: Path, *, show_listed: bool) -> int:
    divergences = load_divergences(divergence_file)
    total_unlisted = total_listed = objects = answers = 0
    for result in results:
        unlisted, listed = classify(result.differences, divergences)
        total_unlisted += len(unlisted)
        total_listed += len(listed)
        objects += result.objects
        answers += result.answers
        state = "ok" if not unlisted else "DIFFERENT"
        extra = f", did not settle: {', '.join(result.unsettled)}" if result.unsettled else ""
        print(
            f"{state:9} {result.name}: {result.objects} objects, {result.answers} answers, "
            f"{len(unlisted)} unlisted and {len(listed)} listed differences{extra}"
        )
        for diff in unlisted:
            print("  " + diff.render().replace("\n", "\n  "))
        if show_listed:
            for diff, ident in listed:
                print(f"  [listed {ident}] {diff.where}")
    print(
        f"conformance: compared {objects} objects and {answers} admission answers in {len(results)} "
        f"scenarios: {total_unlisted} unlisted differences, {total_listed} listed divergences"
    )
    return 1 if total_unlisted else 0


async def run(
    args: argparse.Namespace,
    results: list[ScenarioResult] | None = None,
    progress: Progress | None = None,
) -> list[ScenarioResult]:
    """Start (or attach to) both sides, run every scenario, stop both; ``results`` and ``progress``
    are filled as it goes (what an interrupted or failed run reports)."""
    results = [] if results is None else results
    progress = progress or Progress("conformance")
    if args.migrate_from:
        return await run_migrated(args, results, progress)
    files = scenario_files(args.paths or [KUEUE_SCENARIOS if args.kueue else DEFAULT_SCENARIOS], args.level)
    if not files:
        raise SystemExit(f"error: no manifest files of level {args.level} found")
    workdir = None if args.kubeconfig_ours else harness.new_workdir()
    started = time.monotonic()
    try:
        ours, theirs = await _sides(args, workdir, progress)
    except BaseException:
        if workdir is not None and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    progress.diagnostics.append(lambda: exited_processes([ours, theirs]))
    if workdir is not None:
        inputs = harness.LevelInputs(levels.get(args.level))
        progress.say(
            f"level {args.level}: ours with --api-level={args.level}, theirs "
            f"{inputs.originals.describe()}; runtimes on both: {inputs.runtimes_source()}"
            + (f"; Kueue {kueue.version_for(levels.get(args.level))} in front of both" if args.kueue else "")
        )
    progress.say(f"both sides ready in {time.monotonic() - started:.0f}s")
    settings = Settings(quiet_seconds=args.quiet_seconds, max_seconds=args.max_seconds, kueue=args.kueue)
    run_id = secrets.token_hex(3)
    try:
        for index, path in enumerate(files, 1):
            t0 = time.monotonic()
            with progress.scenario(path.stem):
                result = await run_scenario(
                    path, ours, theirs, run_id, settings, keep=args.keep_namespaces, progress=progress
                )
            progress.say(f"[{index}/{len(files)}] {path.name} done in {time.monotonic() - t0:.0f}s")
            dump(args.dump, result)
            results.append(result)
    finally:
        # Both stops run whatever happens to the other; a failed stop is said, and does not hide
        # the error that ended the run.
        with progress.step("stopping both sides"):
            stops = await asyncio.gather(ours.stop(), theirs.stop(), return_exceptions=True)
        for side, outcome in zip((ours, theirs), stops, strict=True):
            if isinstance(outcome, BaseException):
                progress.say(f"could not stop {side.name}: {longrun.describe(outcome)}")
        if workdir is not None:
            if args.keep_workdir:
                progress.say(f"logs and configurations kept in {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)
    return results


async def run_migrated(
    args: argparse.Namespace, results: list[ScenarioResult], progress: Progress
) -> list[ScenarioResult]:
    """``--migrate-from``: the scenarios of that level on a cluster of it, migrated to ``--level``
    on both sides, then compared (``trainer.conformance.migrated``); the migration's report
    (refusals, what was left out) is printed before the results."""
    files = scenario_files(args.paths or [DEFAULT_SCENARIOS], args.migrate_from)
    if not files:
        raise SystemExit(f"error: no manifest files of level {args.migrate_from} found")
    workdir = harness.new_workdir()
    sides: list[Side] = []
    progress.diagnostics.append(lambda: exited_processes(sides))
    started = time.monotonic()
    settings = Settings(quiet_seconds=args.quiet_seconds, max_seconds=args.max_seconds)
    try:
        outcome = await migrated.run_migrated(
            files,
            workdir,
            secrets.token_hex(3),
            settings,
            level=args.level,
            migrate_from=args.migrate_from,
            nodes=args.nodes,
            pod_run_seconds=args.pod_run_seconds,
            progress=progress,
            results=results,
            keep_sides=sides,
        )
        for result in results:
            dump(args.dump, result)
        for line in outcome.lines():
            print(line, flush=True)
        progress.say(f"migrated run done in {time.monotonic() - started:.0f}s")
    finally:
        with progress.step("stopping both sides"):
            stops = await asyncio.gather(*(s.stop() for s in sides), return_exceptions=True)
        for side, stopped in zip(sides, stops, strict=True):
            if isinstance(stopped, BaseException):
                progress.say(f"could not stop {side.name}: {longrun.describe(stopped)}")
        if args.keep_workdir:
            progress.say(f"logs and configurations kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return results


#: The error's text (a bare timeout: its type and where it was raised).
describe_error = longrun.error_text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.build_only:
        for name, (path, seconds) in originals.build_all(level=levels.get(args.level)).items():
            print(f"{name}: {path} ({f'built in {seconds:.0f}s' if seconds else 'cached'})")
        return 0
    progress = Progress("conformance")
    results: list[ScenarioResult] = []

    def partial() -> None:  # a failed or interrupted run still shows what it compared
        if results:
            print(f"conformance: results of the {len(results)} scenarios that finished:", flush=True)
            report(results, args.divergences, show_listed=args.show_listed)

    async def body() -> int:
        await run(args, results, progress)
        return report(results, args.divergences, show_listed=args.show_listed)

    return longrun.run(progress, body, debug=args.debug, on_stop=partial)
