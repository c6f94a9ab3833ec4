"""The runtime ``Info`` passed between plugins (docs/behaviour/trainer.md §2.3).

Why a mutable bag: upstream's plugins cooperate by editing one ``Info`` in phase order (ML
policy, then pod-group policy, then pod network) before the builders read it. Each plugin only
touches its own part, so the result does not depend on plugin order within a phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from manager.meta.object import Json
from manager.meta.quantity import Quantity
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import MLPolicy, PodGroupPolicy

__all__ = ["ContainerInfo", "Endpoints", "Info", "PodSet", "RuntimePolicy", "Scheduler", "TemplateSpec"]


@dataclass
class ContainerInfo:
    """What plugins add to one container: env, ports and mounts, synced into the JobSet later;
    its image and command as the runtime has them, which a plugin may replace (v2.3.0's Flux
    init container is added whole)."""

    name: str
    image: str = ""
    """Written to the JobSet's container unless empty."""
    command: list[str] | None = None
    """Written to the JobSet's container unless empty."""
    env: list[Json] = field(default_factory=list)
    ports: list[Json] = field(default_factory=list)
    volume_mounts: list[Json] = field(default_factory=list)


@dataclass(frozen=True)
class Endpoints:
    """The pod DNS names of one replicated job, produced on demand (1,000 nodes stay cheap).

    ``<trainjob>-<rjob>-<r>-<k>.<subdomain>`` for each replica ``r`` in ``0 .. replicas-1``,
    then each pod ``k`` in ``0 .. count-1`` (v2.1: one replica, so ``r`` is always 0; v2.3: the
    job's replicas, ``RuntimeLevel.build.endpoint_replicas``).
    """

    trainjob: str
    rjob: str
    subdomain: str
    count: int
    replicas: int = 1

    def __iter__(self) -> Iterator[str]:
        suffix = f".{self.subdomain}"
        for r in range(self.replicas):
            prefix = f"{self.trainjob}-{self.rjob}-{r}-"
            for k in range(self.count):
                yield f"{prefix}{k}{suffix}"

    def __len__(self) -> int:
        return max(self.replicas, 0) * self.count


@dataclass
class PodSet:
    """One replicated job as the plugins see it; same index as in the JobSet spec."""

    name: str
    ancestor: str | None = None
    count: int | None = None
    init_containers: list[ContainerInfo] = field(default_factory=list)
    containers: list[ContainerInfo] = field(default_factory=list)
    volumes: list[Json] = field(default_factory=list)
    endpoints: Iterable[str] | None = None
    single_pod_requests: dict[str, Quantity] = field(default_factory=dict)

    def count_or_one(self) -> int:
        return 1 if self.count is None else self.count


@dataclass
class RuntimePolicy:
    """The runtime's ML policy and pod-group policy (copies: plugins may rewrite them)."""

    ml_policy: MLPolicy | None = None
    pod_group_policy: PodGroupPolicy | None = None


@dataclass
class Scheduler:
    """Labels and annotations the gang-scheduling plugins put on every pod template."""

    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] | None = None


@dataclass
class TemplateSpec:
    """The JobSetSpec apply document (``None`` when the runtime has no JobSet template) and its PodSets."""

    obj_apply: Json | None = None
    pod_sets: list[PodSet] = field(default_factory=list)


@dataclass
class Info:
    """Everything the plugins know about one TrainJob on one runtime."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    runtime_policy: RuntimePolicy = field(default_factory=RuntimePolicy)
    scheduler: Scheduler = field(default_factory=Scheduler)
    template_spec: TemplateSpec = field(default_factory=TemplateSpec)

    def find_pod_set_by_ancestor(self, ancestor: str) -> PodSet | None:
        """The first PodSet whose ancestor label equals ``ancestor``."""
        return next((ps for ps in self.template_spec.pod_sets if ps.ancestor == ancestor), None)

    def count_trainer_nodes(self, num_nodes: int | None) -> PodSet | None:
        """The trainer PodSet, its count set to the TrainJob's ``numNodes`` when that is given
        (the PlainML and Torch plugins' first step; MPI counts its ``node`` job differently)."""
        pod_set = self.find_pod_set_by_ancestor(tc.AncestorTrainer)
        if pod_set is not None and num_nodes is not None:
            pod_set.count = num_nodes
        return pod_set

    def find_pod_set_by_name(self, name: str) -> PodSet | None:
        """The PodSet of the replicated job called ``name``."""
        return next((ps for ps in self.template_spec.pod_sets if ps.name == name), None)

    def find_container_by_pod_set_name(self, pod_set: str, name: str) -> ContainerInfo | None:
        """Container ``name`` of the PodSet called ``pod_set``: its regular containers first,
        then its init containers (upstream v2.3.0's ``FindContainerByPodSetName``)."""
        found = self.find_pod_set_by_name(pod_set)
        if found is None:
            return None
        return next((c for c in (*found.containers, *found.init_containers) if c.name == name), None)

    def find_container_by_pod_set_ancestor_container_name(
        self, ancestor: str, name: str
    ) -> ContainerInfo | None:
        """A regular (not init) container ``name`` in the PodSet with that ancestor."""
        pod_set = self.find_pod_set_by_ancestor(ancestor)
        if pod_set is None:
            return None
        return next((c for c in pod_set.containers if c.name == name), None)
