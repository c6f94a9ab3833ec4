package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/runtime/core"
	testingutil "github.com/kubeflow/trainer/v2/pkg/util/testing"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type tc struct {
	Mode     string            `json:"mode"`
	Runtime  json.RawMessage   `json:"runtime"`
	TrainJob json.RawMessage   `json:"trainjob"`
	Old      json.RawMessage   `json:"old"`
	Existing []json.RawMessage `json:"existing"`
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var c tc
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

func run(c tc) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	ctx := context.Background()
	var objs []client.Object
	var kindProbe map[string]any
	if len(c.Runtime) == 0 || string(c.Runtime) == "null" {
		kindProbe = map[string]any{"kind": "none"}
	} else if err := json.Unmarshal(c.Runtime, &kindProbe); err != nil {
		return nil, err
	}
	if kindProbe["kind"] == "none" {
	} else if kindProbe["kind"] == "TrainingRuntime" {
		var tr trainer.TrainingRuntime
		if err := json.Unmarshal(c.Runtime, &tr); err != nil {
			return nil, err
		}
		objs = append(objs, &tr)
	} else {
		var ctr trainer.ClusterTrainingRuntime
		if err := json.Unmarshal(c.Runtime, &ctr); err != nil {
			return nil, err
		}
		objs = append(objs, &ctr)
	}
	for _, raw := range c.Existing {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	var tj trainer.TrainJob
	if err := json.Unmarshal(c.TrainJob, &tj); err != nil {
		return nil, err
	}
	builder := testingutil.NewClientBuilder().WithObjects(objs...)
	cl := builder.Build()
	runtimes, err := core.New(ctx, cl, testingutil.AsIndex(builder))
	if err != nil {
		return nil, err
	}
	key := tj.Spec.RuntimeRef.Kind
	var rt = runtimes[*key+"."+*tj.Spec.RuntimeRef.APIGroup]
	if c.Mode == "validate" {
		var old *trainer.TrainJob
		if len(c.Old) > 0 && string(c.Old) != "null" {
			old = &trainer.TrainJob{}
			if err := json.Unmarshal(c.Old, old); err != nil {
				return nil, err
			}
		}
		warnings, errs := rt.ValidateObjects(ctx, old, &tj)
		texts := []string{}
		for _, e := range errs {
			texts = append(texts, e.Error())
		}
		return json.Marshal(map[string]any{"warnings": warnings, "errors": texts})
	}
	if c.Mode == "status" {
		status, err := rt.TrainJobStatus(ctx, &tj)
		if err != nil {
			return nil, err
		}
		return json.Marshal(status)
	}
	res, err := rt.NewObjects(ctx, &tj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
