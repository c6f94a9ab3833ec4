// Command mirror is the framework scenario's reconciler on controller-runtime (issue 12): every
// ConfigMap of one namespace mirrored into a Secret of the same name (data copied, the ConfigMap
// as controller owner), as test/bench/mirror/mirror_ours.py does on this repository's manager/.
// Reads come from the cache (For ConfigMaps, Owns Secrets), writes go to the API server
// (controllerutil.CreateOrUpdate); client-go rate limiting as controller-runtime's default (off).
package main

import (
	"context"
	"flag"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

type mirror struct {
	client.Client
}

func (m *mirror) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := m.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // deleted: the Secret goes with it
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, m.Client, secret, func() error {
		data := make(map[string][]byte, len(cm.Data))
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		secret.Data = data
		if secret.Type == "" {
			secret.Type = corev1.SecretTypeOpaque
		}
		return controllerutil.SetControllerReference(&cm, secret, m.Scheme())
	})
	return ctrl.Result{}, err
}

func main() {
	namespace := flag.String("namespace", "bench", "the namespace to mirror")
	workers := flag.Int("workers", 16, "MaxConcurrentReconciles")
	flag.Parse()
	log := ctrl.Log.WithName("mirror")
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
	})
	if err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(&mirror{Client: mgr.GetClient()})
	if err != nil {
		log.Error(err, "controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "start")
		os.Exit(1)
	}
}
