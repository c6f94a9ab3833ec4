"""Upstream's own e2e suites as a second judge: ``trainer-controller-manager upstream-e2e``.

The ``test/e2e`` packages of the API level's releases (``--level``; v2.1: sigs.k8s.io/jobset
v0.10.1, 10 specs, and github.com/kubeflow/trainer/v2 v2.1.0, 2 specs; v2.3: jobset v0.12.0, 14
specs, and trainer v2.3.0, 12 specs) are compiled with ``go test -c`` from the Go module proxy
(cached beside the Go originals) and run, unchanged, against a full local cluster (etcd,
kube-apiserver, controller-manager, scheduler, KWOK nodes) served by this manager at that level
(``ours``, ``--api-level``) and against one served by the level's Go managers (``theirs``), one
side after the other. Both sides get the level's CRDs and runtimes as ``conformance --level``
installs them, plus what upstream trainer's ``hack/e2e-setup-cluster.sh`` of the release adds
(v2.3: the TrainJobStatus feature gate, ``examples/flux/flux-runtime.yaml``).

KWOK's pod timing is set so that what the suites look for exists for a while, as on a real
cluster: a scheduled pod stays Pending ``--pod-start-seconds`` (image pulls: its Job is active but
not ready), a pod with readiness or startup probes is Ready after their initialDelaySeconds, and
a Job's pod succeeds ``--pod-run-seconds`` after it is Ready. The jobset suite first waits for a
Deployment ``jobset-controller-manager`` in ``$NAMESPACE`` to be Available; a stand-in Deployment
(one pause container, run by KWOK) is created for it: the managers themselves run on the host.
Its VolumeClaimPolicies spec wants its two claims bound (kind's local-path provisioner upstream):
two 1 Gi PersistentVolumes of no StorageClass are created for them. Pods are admitted with their
ServiceAccount, as on any cluster (the TrainJobStatus plugin's token volume needs one).

Exit 0 when every spec passed on every side run, 1 when one failed, 2 when the suites could not
run (build, cluster or manager start failures): the last line then names the suite run, the step
and the error ("upstream-e2e: error after N suite runs, during SUITE-SIDE/STEP: ..."; the
traceback above it with --debug or for a bug). SIGINT, SIGTERM or SIGHUP stop the suite and the
cluster, then "upstream-e2e: interrupted by SIGTERM after N suite runs, during ..."; exit 128 +
the signal's number.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from manager import longrun
from manager.envtest.assets import GoMain, ensure_go_main
from manager.longrun import Progress
from trainer import levels
from trainer.conformance import harness, originals
from trainer.conformance.cli import exited_processes
from trainer.conformance.harness import PodTiming, Side
from trainer.levels import ApiLevel

#: The unnamed level's suites (v2.1) (``originals.Originals.e2e_suites`` gives any level's).
SUITES: dict[str, GoMain] = originals.DEFAULT.e2e_suites()
SIDES = ("ours", "theirs")
NAMESPACE = "jobset-system"
STAND_IN = "jobset-controller-manager"
#: Pod timing under which the Go managers pass all 12 specs (see docs/conformance.md).
DEFAULT_TIMING = PodTiming(run_seconds=4.0, start_seconds=3.0, probe_delays=True)


@dataclass
class Spec:
    name: str
    passed: bool
    seconds: float
    failure: str = ""


@dataclass
class SuiteResult:
    suite: str
    side: str
    specs: list[Spec] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int = 0
    log: str = ""
    version: str = ""
    """The suite's release (e.g. ``v2.3.0``); empty: the unnamed level's (v2.1)."""

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.specs)

    @property
    def ok(self) -> bool:
        return bool(self.specs) and self.passed == len(self.specs)


def _say(message: str) -> None:
    print(f"upstream-e2e: {message}", file=sys.stderr, flush=True)


def stand_in_deployment(namespace: str) -> dict[str, Any]:
    """What the jobset suite waits for: a Deployment of that name, Available, never restarted."""
    labels = {"control-plane": "controller-manager", "app.kubernetes.io/name": "jobset-stand-in"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": STAND_IN, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


async def create_stand_in(side: Side, namespace: str) -> None:
    status, body = await side.kube.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    if status not in (201, 409):
        raise RuntimeError(f"creating namespace {namespace} answered {status}: {body}")
    status, body = await side.kube.request(
        "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", stand_in_deployment(namespace)
    )
    if status not in (201, 409):
        raise RuntimeError(f"creating the stand-in Deployment answered {status}: {body}")


#: PersistentVolumes created for the jobset suite's VolumeClaimPolicies spec (two 1 Gi claims).
STAND_IN_VOLUMES = 2


def stand_in_volume(index: int) -> dict[str, Any]:
    """A 1 Gi ReadWriteOnce PersistentVolume of no StorageClass: what a claim of the jobset suite
    (no ``storageClassName``, no default class here) binds to, as kind's local-path provisioner
    gives one upstream. Never mounted: KWOK runs no container."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"upstream-e2e-{index}", "labels": {"app.kubernetes.io/name": "upstream-e2e"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": f"/tmp/upstream-e2e-{index}"},
        },
    }


async def create_stand_in_volumes(side: Side, count: int = STAND_IN_VOLUMES) -> None:
    for index in range(count):
        status, body = await side.kube.request("POST", "/api/v1/persistentvolumes", stand_in_volume(index))
        if status not in (201, 409):
            raise RuntimeError(f"creating PersistentVolume upstream-e2e-{index} answered {status}: {body}")


def parse_junit(path: Path) -> list[Spec]:
    """The ``[It]`` specs of a Ginkgo JUnit report that ran (suite nodes such as BeforeSuite
    left out, and the specs ``--focus`` or ``--skip`` left out, which Ginkgo reports skipped)."""
    specs = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("[It]"):
            continue
        status = case.get("status", "")
        if status == "skipped":
            continue
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        message = ""
        if failure is not None:
            message = (failure.get("message") or "") + "\n" + (failure.text or "")
        specs.append(
            Spec(
                name=name.removeprefix("[It] ").strip(),
                passed=status == "passed",
                seconds=float(case.get("time") or 0),
                failure=message.strip() if status != "passed" else "",
            )
        )
    return specs


async def run_suite(
    binary: Path,
    suite: str,
    side: Side,
    workdir: Path,
    *,
    namespace: str,
    focus: str | None,
    timeout_minutes: float,
    skip: str | None = None,
) -> SuiteResult:
    """One compiled suite against one side's cluster; its output goes to a log file."""
    assert side.env is not None
    out = workdir / f"{suite}-{side.name}"
    out.mkdir(parents=True, exist_ok=True)
    report, log = out / "junit.xml", out / "output.log"
    argv = [
        str(binary),
        "-test.v",
        f"-test.timeout={timeout_minutes + 5:g}m",
        "-ginkgo.v",
        "-ginkgo.no-color",
        f"-ginkgo.timeout={timeout_minutes:g}m",
        f"-ginkgo.junit-report={report}",
    ]
    if focus:
        argv.append(f"-ginkgo.focus={focus}")
    if skip:
        argv.append(f"-ginkgo.skip={skip}")
    env = {**os.environ, "KUBECONFIG": str(side.env.kubeconfig), "NAMESPACE": namespace}
    started = time.monotonic()
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(*argv, cwd=out, env=env, stdout=sink, stderr=sink)
        try:
            code = await proc.wait()
        except BaseException:  # stopped (a signal): the suite does not outlive the run
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            raise
    result = SuiteResult(suite, side.name, seconds=time.monotonic() - started, exit_code=code, log=str(log))
    if report.is_file():
        result.specs = parse_junit(report)
    if not result.specs:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        result.specs = [Spec("(suite did not run its specs)", False, 0.0, f"exit code {code}\n{tail}")]
    return result


async def run_side(
    side_name: str,
    suites: list[str],
    binaries: dict[str, Path],
    workdir: Path,
    args: argparse.Namespace,
    timing: PodTiming,
    progress: Progress | None = None,
    results: list[SuiteResult] | None = None,
    *,
    level: ApiLevel | None = None,
    setup: originals.E2eSetup | None = None,
) -> list[SuiteResult]:
    """Both suites against one side at ``level`` (default: ``originals.UNNAMED_LEVEL``), its cluster
    prepared as upstream's ``setup`` says; each result is appended to ``results`` as it comes."""
    progress = progress or Progress("upstream-e2e", unit="suite runs")
    results = [] if results is None else results
    level = level or originals.UNNAMED_LEVEL
    setup = setup or originals.E2eSetup()
    versions = {name: main.version for name, main in originals.for_level(level).e2e_suites().items()}
    started = time.monotonic()
    start = harness.start_ours if side_name == "ours" else harness.start_theirs
    with progress.step(f"starting the cluster and managers of {side_name}"):
        # Upstream's kind cluster admits pods with their ServiceAccount (the TrainJobStatus
        # plugin's token volume is refused on a pod naming none).
        side = await start(
            workdir,
            args.nodes,
            timing=timing,
            level=level,
            feature_gates=dict(setup.feature_gates) or None,
            service_accounts=True,
        )
    _say(f"{side_name}: cluster and managers ready in {time.monotonic() - started:.0f}s")
    progress.diagnostics.append(lambda: exited_processes([side]))
    try:
        if setup.manifests:
            assert side.env is not None
            with progress.step(f"applying upstream's e2e manifests on {side_name}"):
                await side.env.apply_manifests(setup.manifests, field_manager="upstream-e2e")
        if "jobset" in suites:
            with progress.step(f"creating the stand-in Deployment on {side_name}"):
                await create_stand_in(side, args.namespace)
                await create_stand_in_volumes(side)
        for suite in suites:
            _say(f"{side_name}: running the {suite} suite")
            with progress.scenario(f"{suite}-{side_name}"), progress.step(f"{suite} suite"):
                result = await run_suite(
                    binaries[suite],
                    suite,
                    side,
                    workdir / "suites",
                    namespace=args.namespace,
                    focus=args.focus,
                    skip=args.skip,
                    timeout_minutes=args.timeout_minutes,
                )
            result.version = versions[suite]
            _say(f"{side_name}: {suite} {result.passed}/{len(result.specs)} in {result.seconds:.0f}s")
            results.append(result)
    finally:
        with progress.step(f"stopping {side_name}"):
            await side.stop()
    return results


def report(results: list[SuiteResult]) -> int:
    for result in results:
        version = result.version or SUITES[result.suite].version
        state = "ok" if result.ok else "FAILED"
        who = "this manager" if result.side == "ours" else "the Go managers"
        print(
            f"{state:6} {result.suite} e2e {version} against {result.side} ({who}): "
            f"{result.passed}/{len(result.specs)} passed in {result.seconds:.0f}s"
        )
        for spec in result.specs:
            print(f"  {'ok  ' if spec.passed else 'FAIL'} {spec.name} ({spec.seconds:.1f}s)")
            if not spec.passed:
                print("       " + spec.failure[:2000].replace("\n", "\n       "))
        if not result.ok:
            print(f"  output: {result.log}")
    return 0 if results and all(r.ok for r in results) else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="trainer-controller-manager upstream-e2e",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--level",
        choices=list(levels.LEVELS),
        default=levels.DEFAULT.name,
        help="the API level: its releases' suites, our manager at --api-level, its Go managers "
        "(default %(default)s)",
    )
    p.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="default: both")
    p.add_argument("--suites", nargs="+", choices=sorted(SUITES), default=list(SUITES), help="default: both")
    p.add_argument("--focus", help="only the specs whose text matches this regular expression (Ginkgo)")
    p.add_argument("--skip", help="leave out the specs whose text matches this regular expression (Ginkgo)")
    p.add_argument("--nodes", type=int, default=4, help="KWOK nodes of each local cluster")
    p.add_argument(
        "--pod-start-seconds",
        type=float,
        default=DEFAULT_TIMING.start_seconds,
        help="a scheduled pod stays Pending this long (default %(default)g)",
    )
    p.add_argument(
        "--pod-run-seconds",
        type=float,
        default=DEFAULT_TIMING.run_seconds,
        help="a Job's pod succeeds this long after it is Ready (default %(default)g)",
    )
    p.add_argument(
        "--no-probe-delays",
        action="store_true",
        help="make probed pods Ready at once (their initialDelaySeconds ignored)",
    )
    p.add_argument("--namespace", default=NAMESPACE, help="$NAMESPACE of the jobset suite's stand-in")
    p.add_argument(
        "--timeout-minutes",
        type=float,
        default=45.0,
        help="bound on one suite run (a spec failing for want of a real node waits its 10 minutes)",
    )
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--keep-workdir", action="store_true", help="keep clusters' and suites' logs")
    p.add_argument(
        "--build-only", action="store_true", help="build the suites (and the Go managers) and exit"
    )
    p.add_argument(
        "--debug", action="store_true", help="print the traceback of an error above its one-line summary"
    )
    args = p.parse_args(argv)
    if args.pod_start_seconds < 0 or args.pod_run_seconds < 0:
        p.error("--pod-start-seconds and --pod-run-seconds must not be negative")
    if args.nodes < 1:
        p.error("--nodes must be at least 1: the suites run pods")
    return args


def build(suites: list[str], sides: list[str], level: ApiLevel | None = None) -> dict[str, Path]:
    """The suites of ``level`` (default: ``originals.UNNAMED_LEVEL``) and, for theirs, its Go managers."""
    level = level or originals.UNNAMED_LEVEL
    mains = originals.for_level(level).e2e_suites()
    binaries = {}
    for suite in suites:
        path, seconds = ensure_go_main(mains[suite])
        _say(
            f"{mains[suite].name} {mains[suite].version}: {path} "
            f"({f'built in {seconds:.0f}s' if seconds else 'cached'})"
        )
        binaries[suite] = path
    if "theirs" in sides:
        for name, (path, seconds) in originals.build_all(level=level).items():
            _say(f"{name}: {path} ({f'built in {seconds:.0f}s' if seconds else 'cached'})")
    return binaries


async def run(
    args: argparse.Namespace,
    binaries: dict[str, Path],
    results: list[SuiteResult] | None = None,
    progress: Progress | None = None,
) -> list[SuiteResult]:
    timing = PodTiming(
        run_seconds=args.pod_run_seconds,
        start_seconds=args.pod_start_seconds,
        probe_delays=not args.no_probe_delays,
    )
    workdir = harness.new_workdir()
    results = [] if results is None else results
    level = levels.get(args.level)
    setup = originals.for_level(level).e2e_setup() if "trainer" in args.suites else originals.E2eSetup()
    if setup.feature_gates or setup.manifests:
        extra = ", ".join(
            [*(f"{k}={v}" for k, v in setup.feature_gates.items()), *(p.name for p in setup.manifests)]
        )
        _say(f"from trainer {level.trainer_version}'s {originals.E2E_SETUP_SCRIPT}: {extra}")
    try:
        for side in args.sides:
            await run_side(
                side,
                args.suites,
                binaries,
                workdir,
                args,
                timing,
                progress,
                results,
                level=level,
                setup=setup,
            )
    finally:
        if args.keep_workdir or not all(r.ok for r in results):
            _say(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    progress = Progress("upstream-e2e", unit="suite runs")
    results: list[SuiteResult] = []

    def partial() -> None:  # a failed or interrupted run still shows the suites that ran
        if results:
            print(f"upstream-e2e: results of the {len(results)} suite runs that finished:", flush=True)
            report(results)

    def body() -> int:
        with progress.step("building the suites"):
            binaries = build(args.suites, args.sides, levels.get(args.level))
        if args.build_only:
            return 0
        started = time.monotonic()
        longrun.run_async(run(args, binaries, results, progress))
        code = report(results)
        print(
            f"upstream-e2e: {sum(r.passed for r in results)}/{sum(len(r.specs) for r in results)} "
            f"specs passed in {time.monotonic() - started:.0f}s"
        )
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
        return code

    return longrun.command(progress, body, debug=args.debug, on_stop=partial)


if __name__ == "__main__":
    sys.exit(main())
