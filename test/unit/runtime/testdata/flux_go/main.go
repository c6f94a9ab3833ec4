// Prints what Trainer v2.3.0's Flux plugin builds for a few TrainJobs: the fixtures of
// test/unit/runtime/test_runtime_flux_v2_3.py (regenerate with generate.py).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/jobset/client-go/applyconfiguration/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/constants"
	"github.com/kubeflow/trainer/v2/pkg/runtime"
	"github.com/kubeflow/trainer/v2/pkg/runtime/framework"
	"github.com/kubeflow/trainer/v2/pkg/runtime/framework/plugins/flux"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

type tcase struct {
	Name           string
	UID            string
	NumNodes       int32
	PolicyProcs    int32
	JobProcs       *int32
	JobGPUs        string
	RuntimeGPUs    string
	RuntimeCommand []string
	RuntimeEnv     [][2]string
	JobCommand     []string
	JobArgs        []string
	JobEnv         [][2]string
}

func info(c tcase) *runtime.Info {
	ctr := corev1ac.Container().WithName(constants.Node)
	rc := runtime.Container{Name: constants.Node, Command: c.RuntimeCommand}
	for _, kv := range c.RuntimeEnv {
		rc.Env = append(rc.Env, *corev1ac.EnvVar().WithName(kv[0]).WithValue(kv[1]))
	}
	if c.RuntimeGPUs != "" {
		ctr = ctr.WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(c.RuntimeGPUs)}))
	}
	return &runtime.Info{
		RuntimePolicy: runtime.RuntimePolicy{MLPolicySource: &trainer.MLPolicySource{Flux: &trainer.FluxMLPolicySource{NumProcPerNode: ptr.To(c.PolicyProcs)}}},
		TemplateSpec: runtime.TemplateSpec{
			ObjApply: v1alpha2.JobSetSpec().WithReplicatedJobs(
				v1alpha2.ReplicatedJob().WithName(constants.Node).WithTemplate(batchv1ac.JobTemplateSpec().
					WithLabels(map[string]string{constants.LabelTrainJobAncestor: constants.AncestorTrainer}).
					WithSpec(batchv1ac.JobSpec().WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(ctr)))))),
			PodSets: []runtime.PodSet{{Name: constants.Node, Ancestor: ptr.To(constants.AncestorTrainer), Count: ptr.To[int32](1), Containers: []runtime.Container{rc}}},
		},
	}
}

func main() {
	cases := []tcase{
		{Name: "basic", UID: "6a1f3c52-1d1e-4f44-9e55-0c1d2e3f4a5b", NumNodes: 2, PolicyProcs: 1, JobCommand: []string{"lmp", "-in", "in.reaxc.hns"}},
		{Name: "gpus-env-procs", UID: "uid-123", NumNodes: 4, PolicyProcs: 1, JobProcs: ptr.To[int32](4), JobGPUs: "2",
			RuntimeCommand: []string{"python"}, RuntimeEnv: [][2]string{{"FLUX_NETWORK_DEVICE", "eth1"}, {"OTHER", "x"}, {"FLUX_QUEUE_POLICY", ""}},
			JobArgs: []string{" train.py ", "--epochs", "3"}, JobEnv: [][2]string{{"FLUX_QUEUE_POLICY", "easy"}, {"FLUX_VIEW_IMAGE", "ghcr.io/converged-computing/flux-view-rocky:tag-9"}}},
		{Name: "one-node-runtime-gpu", UID: "", NumNodes: 1, PolicyProcs: 3, RuntimeGPUs: "1", RuntimeCommand: []string{"sleep", "infinity"}},
	}
	out := map[string]any{}
	ctx := context.Background()
	cli := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	p, err := flux.New(ctx, cli, nil, nil)
	if err != nil {
		panic(err)
	}
	for _, c := range cases {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-x", Name: "flux-job"}, Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To(c.NumNodes), NumProcPerNode: c.JobProcs}}}
		tj.Spec.Trainer.Command = c.JobCommand
		tj.Spec.Trainer.Args = c.JobArgs
		for _, kv := range c.JobEnv {
			tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
		}
		if c.JobGPUs != "" {
			tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(c.JobGPUs)}}
		}
		tj.UID = types.UID(c.UID)
		in := info(c)
		if err := p.(framework.EnforceMLPolicyPlugin).EnforceMLPolicy(in, tj); err != nil {
			panic(err)
		}
		objs, err := p.(framework.ComponentBuilderPlugin).Build(ctx, in, tj)
		if err != nil {
			panic(err)
		}
		out[c.Name] = map[string]any{"case": c, "command": tj.Spec.Trainer.Command, "args": tj.Spec.Trainer.Args, "initContainers": in.TemplateSpec.PodSets[0].InitContainers, "containers": in.TemplateSpec.PodSets[0].Containers, "volumes": in.TemplateSpec.PodSets[0].Volumes, "objects": objs}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
