"""``conformance --level v2.3 --migrate-from v2.1``: a v2.1 cluster migrated, then compared.

Each side's control plane goes through the steps of docs/migration.md, the same on both sides:

1. a v2.1 cluster: v2.1's CRDs, our manager at ``--api-level=v2.1`` with its webhooks and the
   shipped v2.1 runtimes (``config/runtimes``); every scenario of level v2.1 gets its namespace
   and the documents before its first ``Step`` (its first state: TrainJobs suspended or not as
   the file has them, its runtimes, JobSets, ...), admitted by v2.1's webhooks (what they refuse
   a v2.1 cluster does not hold), and settles (JobSets built, pods run). ``WebhookRequest`` and
   ``StatusRequest`` documents and the later steps are not applied: they are v2.1 inputs
   (``podTemplateOverrides`` updates, ...) that cannot apply after the migration; the report says
   how many each scenario leaves out;
2. the manager stopped, every admission webhook configuration removed;
3. the bridge CRDs (``config/migration/v2.1-to-v2.3``) installed;
4. ``migrate --to v2.3`` (``trainer.migrate.cli.migrate``, the command itself) run; when it
   refuses, the refused objects are recorded by name and field, deleted (finalizers dropped:
   no manager runs to remove them) and the command run again, until it migrates;
5. a second run, which must print ``migrate: nothing to change`` (else the run stops);
6. the level's CRDs installed over the bridge (ours: ``config/overlays/v2.3/crd``; theirs:
   upstream trainer v2.3.0's and jobset v0.12.0's);
7. the level's managers started on that cluster (ours at v2.3; Go trainer v2.3.0 and jobset
   v0.12.0), with their webhooks; the runtimes are the migrated ones (none re-applied).

Then each scenario's namespace settles and is compared as ``final/...``, with its refusals
(``migrate/refused``, also compared: the same command on the same objects).
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from manager.client import Client
from manager.client.errors import TransportError
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.longrun import Progress
from trainer import levels
from trainer.conformance import harness
from trainer.conformance.diff import compare
from trainer.conformance.harness import Side
from trainer.conformance.normalize import Normaliser
from trainer.conformance.runner import (
    CONFORMANCE_API,
    Outcome,
    Scenario,
    ScenarioResult,
    Settings,
    both,
    namespace_for,
)
from trainer.migrate.cli import FIELD_MANAGER, migrate

__all__ = ["BRIDGE", "MIGRATIONS", "Prepared", "first_state", "parse_refusals", "run_migrated"]

BRIDGE = harness.ROOT / "config" / "migration" / "v2.1-to-v2.3"
MIGRATIONS = {("v2.1", "v2.3")}
"""(from, to) pairs ``--migrate-from`` runs."""
MIGRATE_ATTEMPTS = 6
TRANSPORT_ATTEMPTS = 3
MIGRATED_KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime")
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
_REFUSED = re.compile(
    r"^migrate: refused: (?P<kind>\w+) (?P<where>[^\s:]+): (?P<what>.*?)(; nothing was changed)?$"
)
WEBHOOK_CONFIGURATIONS = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
)


LEFT_OUT_HEADER = re.compile(r"^#\s*migrate-from:\s*left out:\s*(?P<why>.+?)\s*$")


def left_out_reason(path: Path) -> str | None:
    """Why a scenario is not run in this mode: its header line ``# migrate-from: left out: WHY``
    (a comment line before the first document), for a first state that is no state (a JobSet
    the file's later steps stop restarting for ever); None: it is run."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        if m := LEFT_OUT_HEADER.match(line):
            return m["why"]
    return None


def first_state(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The documents a scenario's first state is made of (those before its first ``Step``, but
    ``WebhookRequest``/``StatusRequest``), and how many documents are left out."""
    kept: list[dict[str, Any]] = []
    for doc in docs:
        if doc.get("apiVersion") == CONFORMANCE_API:
            if doc.get("kind") == "Step":
                break
            continue
        kept.append(doc)
    return kept, len(docs) - len(kept)


@dataclass(frozen=True)
class Refused:
    """An object ``migrate`` refused: kind, ``namespace/name`` (or name), what it said."""

    kind: str
    where: str
    what: str

    @property
    def namespace(self) -> str | None:
        return self.where.split("/", 1)[0] if "/" in self.where else None

    @property
    def name(self) -> str:
        return self.where.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return f"{self.kind} {self.where}: {self.what}"


def parse_refusals(output: str) -> list[Refused]:
    """The objects named by ``migrate: refused: <Kind> <ns/name>: ...`` lines of its output."""
    out = []
    for line in output.splitlines():
        if (m := _REFUSED.match(line)) and m["kind"] in MIGRATED_KINDS:
            out.append(Refused(m["kind"], m["where"], m["what"]))
    return out


@dataclass
class Prepared:
    """What steps 1-6 did on one side."""

    env: Environment
    created: dict[str, list[str]] = field(default_factory=dict)
    """Per scenario: the documents v2.1's admission refused (not on the cluster)."""
    left_out: dict[str, int] = field(default_factory=dict)
    """Per scenario: documents not applied (later steps, direct requests)."""
    refused: list[Refused] = field(default_factory=list)
    migrate_output: list[str] = field(default_factory=list)
    second_output: str = ""


async def _client_run(env: Environment, dry_run: bool = False) -> tuple[int, str]:
    """``migrate --to v2.3`` against ``env`` (a fresh client: discovery after a CRD change). A
    request that times out (a loaded machine) runs the command again, as docs/migration.md says
    to do with a run cut short (it is safe to rerun), up to ``TRANSPORT_ATTEMPTS`` times."""
    config = await load_kubeconfig(env.kubeconfig)
    last: TransportError | None = None
    for _ in range(TRANSPORT_ATTEMPTS):
        out = io.StringIO()
        try:
            async with Cluster(config, field_owner=FIELD_MANAGER) as cluster:
                client = Client(cluster.transport, cluster.mapper, field_owner=FIELD_MANAGER)
                code = await migrate(client, to="v2.3", dry_run=dry_run, out=out)
        except TransportError as err:
            last = err
            await asyncio.sleep(2)
            continue
        return code, out.getvalue()
    raise RuntimeError(f"migrate --to v2.3: {last} (in each of {TRANSPORT_ATTEMPTS} runs)")


async def _remove(side: Side, refused: Refused) -> None:
    """Delete a refused object; no manager runs to remove its finalizers, so they go first."""
    ns = refused.namespace
    await side.kube.patch(
        TRAINER_API, refused.kind, refused.name, ns, {"metadata": {"finalizers": None}}, "merge"
    )
    await side.kube.delete(TRAINER_API, refused.kind, refused.name, ns)
    path = await side.kube.collection_path(TRAINER_API, refused.kind, ns)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code, _ = await side.kube.request("GET", f"{path}/{refused.name}")
        if code == 404:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(
        f"{side.name}: refused {refused.kind} {refused.where} still there 60s after its deletion"
    )


async def _delete_webhook_configurations(side: Side) -> None:
    for collection in WEBHOOK_CONFIGURATIONS:
        code, body = await side.kube.request("GET", collection)
        if code != 200:
            raise RuntimeError(f"{side.name}: listing {collection} answered {code}: {body}")
        for item in body.get("items") or []:
            await side.kube.request("DELETE", f"{collection}/{item['metadata']['name']}")


async def prepare(
    name: str,
    workdir: Path,
    files: list[Path],
    run_id: str,
    settings: Settings,
    *,
    nodes: int,
    pod_run_seconds: float,
    to_crds: Callable[[], list[Path]],
    progress: Progress | None = None,
) -> Prepared:
    """Steps 1-6 on one side's control plane (module docstring); the control plane is left
    running, without managers, holding the migrated objects under the level's CRDs."""
    v2_1 = levels.get("v2.1")
    side = await harness.start_ours(workdir / "v2.1", nodes, pod_run_seconds, level=v2_1)
    side.name = name
    assert side.env is not None
    prepared = Prepared(side.env)
    try:
        for path in files:
            scenario = Scenario(path, namespace_for(path, run_id), settings, progress)
            scenario.docs, prepared.left_out[scenario.name] = first_state(scenario.docs)
            outcome = await scenario.run(side)
            prepared.created[scenario.name] = [
                key.split("/", 2)[2] + f": {answer['message']}"
                for key, answer in outcome.records.items()
                if key.startswith("answer/") and not answer.get("allowed")
            ]
        for proc in reversed(side.processes):  # step 2
            proc.stop(timeout=15)
        side.processes.clear()
        await _delete_webhook_configurations(side)
        await side.env.install_crds([BRIDGE])  # step 3
        for _ in range(MIGRATE_ATTEMPTS):  # step 4
            code, output = await _client_run(side.env)
            prepared.migrate_output.append(output)
            if code == 0:
                break
            refused = parse_refusals(output)
            if not refused:
                raise RuntimeError(f"{name}: migrate --to v2.3 exited {code} refusing no object:\n{output}")
            for r in refused:
                if r not in prepared.refused:
                    prepared.refused.append(r)
                await _remove(side, r)
        else:
            raise RuntimeError(f"{name}: migrate --to v2.3 still refused after {MIGRATE_ATTEMPTS} runs")
        code, prepared.second_output = await _client_run(side.env)  # step 5
        if code != 0 or "migrate: nothing to change" not in prepared.second_output:
            raise RuntimeError(
                f"{name}: a second migrate --to v2.3 run did not find nothing to change (exit {code}):\n"
                f"{prepared.second_output}"
            )
        await side.env.install_crds(to_crds())  # step 6
    except BaseException:
        await side.stop()
        raise
    await side.kube.close()
    return prepared


class MigratedScenario(Scenario):
    """A scenario whose objects are already on the cluster (migrated): settle, compare."""

    def __init__(
        self,
        path: Path,
        namespace: str,
        settings: Settings,
        refused: list[Refused],
        progress: Progress | None,
    ) -> None:
        super().__init__(path, namespace, settings, progress)
        self.created = first_state(self.docs)[0]
        self.docs = []
        self.refused = refused

    async def run(self, side: Side) -> Outcome:
        out = Outcome()
        with self.step(side, "list nodes"):
            nodes = await side.kube.list("v1", "Node", None) or []
        norm = Normaliser(self.namespace, [n["metadata"]["name"] for n in nodes])
        with self.step(side, "settle final"):
            await self._settle(side, norm, out, "final")
        mine = [str(r) for r in self.refused if r.namespace == self.namespace or self._cluster_doc(r)]
        out.records["migrate/refused"] = sorted(mine)
        for key, value in list(out.records.items()):
            out.records[key] = norm.strings(value)
        return out

    def _cluster_doc(self, refused: Refused) -> bool:
        """A refused cluster-scoped object this scenario created."""
        if refused.namespace is not None:
            return False
        return any(
            d.get("kind") == refused.kind and (d.get("metadata") or {}).get("name") == refused.name
            for d in self.created
        )


@dataclass
class MigratedRun:
    """What the migrated run reports besides the scenario results."""

    ours: Prepared
    theirs: Prepared
    files: list[Path]
    skipped: dict[str, str] = field(default_factory=dict)
    """Files left out by their ``# migrate-from: left out:`` header, with the reason."""

    def lines(self) -> list[str]:
        """The report's lines on what was migrated, refused and left out (ours' side; a side whose
        migration differed is a compared difference, ``migrate/refused``)."""
        out = [f"migrated {name}: left out: {why}" for name, why in self.skipped.items()]
        for path in self.files:
            name = path.stem
            notes = []
            if self.ours.left_out.get(name):
                notes.append(
                    f"{self.ours.left_out[name]} document(s) not applied (later steps, direct requests: "
                    "first state only)"
                )
            if self.ours.created.get(name):
                notes.append(
                    f"{len(self.ours.created[name])} refused by v2.1's admission (not on a v2.1 cluster)"
                )
            if notes:
                out.append(f"migrated {name}: " + "; ".join(notes))
        for r in self.ours.refused:
            out.append(f"migrate refused (left out): {r}")
        out.append(
            f"migrate: {len(self.ours.refused)} object(s) refused and left out; second run: "
            f"{self.ours.second_output.strip().splitlines()[-1] if self.ours.second_output.strip() else ''}"
        )
        return out


async def _raise_first(outcomes: Sequence[Any], cleanups: list[Coroutine[Any, Any, None]]) -> None:
    """When an outcome is an exception: run ``cleanups`` (else they are closed) and raise it."""
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if not errors:
        for c in cleanups:
            c.close()
        return
    await asyncio.gather(*cleanups, return_exceptions=True)
    raise errors[0]


async def run_migrated(
    files: list[Path],
    workdir: Path,
    run_id: str,
    settings: Settings,
    *,
    level: str,
    migrate_from: str,
    nodes: int,
    pod_run_seconds: float,
    progress: Progress,
    results: list[ScenarioResult],
    keep_sides: list[Side],
) -> MigratedRun:
    """Prepare both sides (steps 1-6), start the level's managers on them, compare each
    scenario's namespace; ``results`` is filled as it goes, ``keep_sides`` gets the started
    sides (the caller stops them)."""
    if (migrate_from, level) not in MIGRATIONS:
        raise ValueError(f"--migrate-from {migrate_from} to --level {level}: supported: {sorted(MIGRATIONS)}")
    target = levels.get(level)
    inputs = harness.LevelInputs(target)
    skipped = {p.stem: why for p in files if (why := left_out_reason(p)) is not None}
    files = [p for p in files if p.stem not in skipped]
    with progress.step("preparing both sides (v2.1 cluster, migrate)"):
        made = await asyncio.gather(
            prepare(
                "ours",
                workdir / "ours",
                files,
                run_id,
                settings,
                nodes=nodes,
                pod_run_seconds=pod_run_seconds,
                to_crds=inputs.our_crds,
                progress=progress,
            ),
            prepare(
                "theirs",
                workdir / "theirs",
                files,
                run_id,
                settings,
                nodes=nodes,
                pod_run_seconds=pod_run_seconds,
                to_crds=inputs.their_crds,
                progress=progress,
            ),
            return_exceptions=True,
        )
    await _raise_first(made, [m.env.stop() for m in made if isinstance(m, Prepared)])
    ours_p, theirs_p = made[0], made[1]
    assert isinstance(ours_p, Prepared) and isinstance(theirs_p, Prepared)
    with progress.step("starting the level's managers on the migrated clusters"):
        started = await asyncio.gather(
            harness.start_ours(
                workdir / "ours" / level,
                nodes,
                pod_run_seconds,
                level=target,
                env=ours_p.env,
                apply_runtimes=False,
            ),
            harness.start_theirs(
                workdir / "theirs" / level,
                nodes,
                pod_run_seconds,
                level=target,
                env=theirs_p.env,
                apply_runtimes=False,
            ),
            return_exceptions=True,
        )
    # a start that fails stops its own side; the other one is stopped here
    await _raise_first(started, [s.stop() for s in started if isinstance(s, Side)])
    ours, theirs = started[0], started[1]
    assert isinstance(ours, Side) and isinstance(theirs, Side)
    keep_sides += [ours, theirs]
    for index, path in enumerate(files, 1):
        t0 = time.monotonic()
        namespace = namespace_for(path, run_id)
        with progress.scenario(path.stem):
            a_s = MigratedScenario(path, namespace, settings, ours_p.refused, progress)
            b_s = MigratedScenario(path, namespace, settings, theirs_p.refused, progress)
            a, b = await both(a_s.run(ours), b_s.run(theirs))
        diffs = compare(a_s.name, a.records, b.records)
        keys = set(a.records) | set(b.records)
        unsettled = [f"ours:{u}" for u in a.unsettled] + [f"theirs:{u}" for u in b.unsettled]
        # migrate/refused is compared but is no admission answer
        results.append(ScenarioResult(a_s.name, diffs, len(keys) - 1, 0, unsettled, a.records, b.records))
        progress.say(f"[{index}/{len(files)}] {path.name} compared in {time.monotonic() - t0:.0f}s")
    return MigratedRun(ours_p, theirs_p, files, skipped)
