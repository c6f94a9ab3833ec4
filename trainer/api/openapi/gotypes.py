"""Regenerate ``go-types.json``: the Go struct types behind our API objects, as encoding/json sees them.

Development tool, not imported at run time. Why it exists: a Go manager decodes every admission
object into typed structs and encodes it back, so (1) a value of the wrong JSON type is refused
with an error naming the Go struct, the JSON path and the Go type, and (2) every field Go
serialises without ``omitempty`` comes back with its zero value. Neither the CRD schemas nor the
OpenAPI snapshot carry those facts exactly (named string types such as ``v1.RestartPolicy``,
pointers, ``omitempty``/``omitzero``, struct-valued fields that ``omitempty`` never drops), so
they are read from the Go types themselves by reflection: a small Go program, built against the
exact module versions, prints every struct reachable from the roots with its JSON fields and the
JSON of its zero value. A field promoted from an embedded struct names the embedding fields
(``embedded``), which newer ``sigs.k8s.io/json`` put into a type error's path.
``trainer.api.gocodec`` reads the result.

Run: ``python -m trainer.api.openapi.gotypes`` (needs Go and the Go module proxy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).with_name("go-types.json")
MODULES = {"sigs.k8s.io/jobset": "v0.10.1", "github.com/kubeflow/trainer/v2": "v2.1.0"}
# Level v2.3's JobSet webhooks mirror the jobset v0.12.0 binary: its JobSet and the k8s.io/api it
# builds with (v0.36, whose Pod its pod webhook decodes).
OUT_JOBSET_V0_12 = Path(__file__).with_name("go-types-jobset-v0.12.0.json")
MODULES_JOBSET_V0_12 = {"sigs.k8s.io/jobset": "v0.12.0", "k8s.io/api": "v0.36.0"}
# Level v2.3's Trainer webhooks mirror the trainer v2.3.0 binary: its TrainJob, TrainingRuntime and
# ClusterTrainingRuntime with the jobset and k8s.io/api of its go.mod.
OUT_TRAINER_V2_3 = Path(__file__).with_name("go-types-trainer-v2.3.0.json")
MODULES_TRAINER_V2_3 = {
    "github.com/kubeflow/trainer/v2": "v2.3.0",
    "sigs.k8s.io/jobset": "v0.12.0",
    "k8s.io/api": "v0.36.2",
}

PROGRAM = r"""
package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

var unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

type typ struct {
	Kind string `json:"kind"`
	Go   string `json:"go"`
	Ref  string `json:"ref,omitempty"`
	Elem *typ   `json:"elem,omitempty"`
}

type field struct {
	JSON      string   `json:"json"`
	Type      typ      `json:"type"`
	OmitEmpty bool     `json:"omitempty,omitempty"`
	OmitZero  bool     `json:"omitzero,omitempty"`
	Embedded  []string `json:"embedded,omitempty"`
}

type strct struct {
	Name   string  `json:"name"`
	Fields []field `json:"fields"`
	Zero   any     `json:"zero"`
}

var out = map[string]*strct{}

func key(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

func describe(t reflect.Type) typ {
	d := typ{Go: t.String()}
	if t.Kind() != reflect.Ptr && reflect.PointerTo(t).Implements(unmarshaler) {
		d.Kind, d.Ref = "custom", key(t)
		return d
	}
	switch t.Kind() {
	case reflect.Ptr, reflect.Slice, reflect.Map:
		e := describe(t.Elem())
		d.Kind, d.Elem = t.Kind().String(), &e
	case reflect.Struct:
		d.Kind, d.Ref = "struct", key(t)
		walk(t)
	default:
		d.Kind = t.Kind().String()
	}
	return d
}

func fields(t reflect.Type) []field {
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		opts = "," + opts + ","
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Ptr {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				// promoted fields; the Go names of the embedding fields, outermost first
				for _, sub := range fields(ft) {
					sub.Embedded = append([]string{f.Name}, sub.Embedded...)
					fs = append(fs, sub)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, field{JSON: name, Type: describe(f.Type),
			OmitEmpty: strings.Contains(opts, ",omitempty,"), OmitZero: strings.Contains(opts, ",omitzero,")})
	}
	return fs
}

func walk(t reflect.Type) {
	k := key(t)
	if _, ok := out[k]; ok {
		return
	}
	s := &strct{Name: t.Name()}
	out[k] = s
	s.Fields = fields(t)
	b, _ := json.Marshal(reflect.Zero(t).Interface())
	json.Unmarshal(b, &s.Zero)
}

func main() {
	for _, root := range []any{jobset.JobSet{}, trainer.TrainJob{}, trainer.TrainingRuntime{},
		trainer.ClusterTrainingRuntime{}, corev1.Pod{}} {
		walk(reflect.TypeOf(root))
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
"""


def _jobset_only(program: str) -> str:
    """The program without the trainer module: the JobSet and Pod roots alone."""
    program = program.replace('\ttrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"\n', "")
    return program.replace(
        "trainer.TrainJob{}, trainer.TrainingRuntime{},\n\t\ttrainer.ClusterTrainingRuntime{}, ", ""
    )


def main() -> int:
    for out, modules, program in (
        (OUT, MODULES, PROGRAM),
        (OUT_JOBSET_V0_12, MODULES_JOBSET_V0_12, _jobset_only(PROGRAM)),
        (OUT_TRAINER_V2_3, MODULES_TRAINER_V2_3, PROGRAM),
    ):
        if _generate(out, modules, program):
            return 1
    return 0


def _generate(out: Path, modules: dict[str, str], program: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        requires = "\n".join(f"\t{mod} {ver}" for mod, ver in modules.items())
        Path(tmp, "go.mod").write_text(f"module gotypes\n\ngo 1.24\n\nrequire (\n{requires}\n)\n")
        Path(tmp, "main.go").write_text(program)
        env = {**os.environ, "GOFLAGS": "-mod=mod"}
        result = subprocess.run(
            ["go", "run", "."], cwd=tmp, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            return 1
    types = json.loads(result.stdout)
    data = {"source": modules, "types": dict(sorted(types.items()))}
    out.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {out} ({len(types)} struct types)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
