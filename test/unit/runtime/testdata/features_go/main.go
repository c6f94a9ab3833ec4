// Runs Trainer v2.3.0's own runtime (core.New(...).NewObjects on a fake client) for the cases
// of test/unit/runtime/test_runtime_features_v2_3.py: torch envInjection, resourcesPerNode
// merged per key, SyncParallelCount and the endpoints of every replica. Reads one case a line
// ({"runtime": ..., "trainjob": ...}) on stdin, prints one JSON line per case: the objects
// built, or {"error": ...}. Regenerate the fixtures with generate.py.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/runtime/core"
	testingutil "github.com/kubeflow/trainer/v2/pkg/util/testing"
)

type tcase struct {
	Runtime  json.RawMessage `json:"runtime"`
	TrainJob json.RawMessage `json:"trainjob"`
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var c tcase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			panic(err)
		}
		out, err := run(c)
		if err != nil {
			b, _ := json.Marshal(map[string]string{"error": err.Error()})
			fmt.Println(string(b))
			continue
		}
		fmt.Println(string(out))
	}
}

func run(c tcase) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	ctx := context.Background()
	var probe map[string]any
	if err := json.Unmarshal(c.Runtime, &probe); err != nil {
		return nil, err
	}
	var objs []client.Object
	if probe["kind"] == "TrainingRuntime" {
		var tr trainer.TrainingRuntime
		if err := json.Unmarshal(c.Runtime, &tr); err != nil {
			return nil, err
		}
		objs = append(objs, &tr)
	} else {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(c.Runtime); err != nil {
			return nil, err
		}
		var ctr trainer.ClusterTrainingRuntime
		if err := json.Unmarshal(c.Runtime, &ctr); err != nil {
			return nil, err
		}
		objs = append(objs, &ctr)
	}
	var tj trainer.TrainJob
	if err := json.Unmarshal(c.TrainJob, &tj); err != nil {
		return nil, err
	}
	builder := testingutil.NewClientBuilder().WithObjects(objs...)
	cl := builder.Build()
	runtimes, err := core.New(ctx, cl, testingutil.AsIndex(builder), nil)
	if err != nil {
		return nil, err
	}
	rt := runtimes[*tj.Spec.RuntimeRef.Kind+"."+*tj.Spec.RuntimeRef.APIGroup]
	res, err := rt.NewObjects(ctx, &tj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
