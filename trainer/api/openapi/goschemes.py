"""Regenerate ``go-schemes.json``: the kinds each Go manager's scheme registers.

Development tool, not imported at run time. Why it exists: a Go webhook decodes an admission
object with apimachinery's decoder over its manager's scheme, and what it answers for an object
of another kind depends on that scheme: a kind the scheme does not know is ``no kind "X" is
registered for version "v" in scheme "pkg/runtime/scheme.go:110"``, one it knows is decoded into
its own type and then refused with ``unable to decode <group/version, Kind=X> into *<type>``.
Each binary registers client-go's scheme (every built-in kind), its own API groups and those it
reads (the trainer: JobSet, scheduler-plugins, Volcano), as its ``main.go`` does; a small Go
program built against the binary's module at its version prints ``Scheme.AllKnownTypes()``.
``trainer.api.gocodec`` reads the result.

Run: ``python -m trainer.api.openapi.goschemes`` (needs Go and the Go module proxy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).with_name("go-schemes.json")

_TRAINER_IMPORTS = """
	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
"""
_TRAINER_ADDS = """
	utilruntime.Must(configapi.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
"""
_JOBSET_IMPORTS = """
	configapi "sigs.k8s.io/jobset/api/config/v1alpha1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
"""
_JOBSET_ADDS = """
	utilruntime.Must(jobset.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))
"""

PROGRAM = """
package main

import (
	"encoding/json"
	"os"
	"sort"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
%(imports)s)

func main() {
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
%(adds)s
	var kinds []string
	for gvk := range scheme.AllKnownTypes() {
		kinds = append(kinds, gvk.Group+"/"+gvk.Version+"/"+gvk.Kind)
	}
	sort.Strings(kinds)
	json.NewEncoder(os.Stdout).Encode(kinds)
}
"""

# binary -> (the module it is built from, at its release, and what its main.go registers)
BINARIES = {
    "trainer-v2.1.0": ("github.com/kubeflow/trainer/v2", "v2.1.0", _TRAINER_IMPORTS, _TRAINER_ADDS),
    "jobset-v0.10.1": ("sigs.k8s.io/jobset", "v0.10.1", _JOBSET_IMPORTS, _JOBSET_ADDS),
    "trainer-v2.3.0": ("github.com/kubeflow/trainer/v2", "v2.3.0", _TRAINER_IMPORTS, _TRAINER_ADDS),
    "jobset-v0.12.0": ("sigs.k8s.io/jobset", "v0.12.0", _JOBSET_IMPORTS, _JOBSET_ADDS),
}


def _kinds(module: str, version: str, imports: str, adds: str) -> list[str] | None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "go.mod").write_text(f"module goschemes\n\ngo 1.24\n\nrequire {module} {version}\n")
        Path(tmp, "main.go").write_text(PROGRAM % {"imports": imports, "adds": adds})
        env = {**os.environ, "GOFLAGS": "-mod=mod"}
        result = subprocess.run(
            ["go", "run", "."], cwd=tmp, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            return None
    kinds: list[str] = json.loads(result.stdout)
    return kinds


def main() -> int:
    schemes: dict[str, list[str]] = {}
    source: dict[str, dict[str, str]] = {}
    for binary, (module, version, imports, adds) in BINARIES.items():
        kinds = _kinds(module, version, imports, adds)
        if kinds is None:
            return 1
        schemes[binary], source[binary] = kinds, {module: version}
        print(f"{binary}: {len(kinds)} kinds", file=sys.stderr)
    OUT.write_text(json.dumps({"source": source, "schemes": schemes}, sort_keys=True, indent=0) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
