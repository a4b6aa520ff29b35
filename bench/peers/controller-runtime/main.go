// A controller-runtime operator for the peer benchmark (bench/peers): the example Greeting's
// reconcile written as a kubebuilder user would (typed cache, CreateOrUpdate of the owned
// ConfigMap, a status merge patch), or with --mode=noop a controller that caches Tinies and the
// ConfigMaps it would own and does nothing: the memory floor of an informer-cache operator.
// --group/--version/--kind point it at another kind of the Greeting's shape (bench:platform runs
// ten, one per kind); --child-label names the label it puts on its ConfigMaps, and
// --cache-children-by-label caches only ConfigMaps carrying it (a tuned operator sharing a
// namespace with others; by default it caches every ConfigMap of the namespace, as Owns does).
//
// On stdout: one line `{"synced":<seconds since start>}` once its informers have synced.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type greetingReconciler struct {
	client.Client
	scheme     *runtime.Scheme
	childLabel string
}

func (r *greetingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var g Greeting
	if err := r.Get(ctx, req.NamespacedName, &g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name + "-greeting", Namespace: g.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[r.childLabel] = g.Name
		cm.Data = map[string]string{"message": g.Spec.Message}
		return controllerutil.SetControllerReference(&g, cm, r.scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}
	if g.Status.ObservedGeneration == g.Generation && g.Status.Phase == "Ready" && meta.IsStatusConditionTrue(g.Status.Conditions, "Ready") {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(g.DeepCopy())
	g.Status.Phase = "Ready"
	g.Status.ObservedGeneration = g.Generation
	meta.SetStatusCondition(&g.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reconciled", ObservedGeneration: g.Generation})
	return ctrl.Result{}, r.Status().Patch(ctx, &g, patch)
}

func main() {
	mode := flag.String("mode", "greeting", "greeting: the example Greeting's reconcile; noop: cache Tinies and ConfigMaps, reconcile nothing")
	namespace := flag.String("namespace", "", "the only namespace watched (required)")
	workers := flag.Int("workers", 1, "MaxConcurrentReconciles")
	qps := flag.Float64("qps", -1, "client QPS (-1: no client-side rate limit)")
	burst := flag.Int("burst", 1000, "client burst")
	verbose := flag.Bool("verbose", false, "log every reconcile")
	group := flag.String("group", "example.com", "the Greeting-shaped kind's API group")
	version := flag.String("version", "v1", "its version")
	kind := flag.String("kind", "Greeting", "its kind (the REST mapper finds its plural by discovery)")
	childLabel := flag.String("child-label", "example.com/greeting", "the label key on every owned ConfigMap (value: the owner's name)")
	cacheByLabel := flag.Bool("cache-children-by-label", false, "cache only the ConfigMaps that carry --child-label")
	flag.Parse()
	started := time.Now()
	if *namespace == "" {
		fmt.Fprintln(os.Stderr, "--namespace is required")
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(*verbose)))

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, greetingTypes(schema.GroupVersion{Group: *group, Version: *version}, *kind), addTinyTypes} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(2)
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = *burst
	cacheOptions := cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}}
	if *cacheByLabel {
		has, err := labels.NewRequirement(*childLabel, selection.Exists, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "--child-label:", err)
			os.Exit(2)
		}
		cacheOptions.ByObject = map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*has)}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOptions,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}

	var primary client.Object
	var r reconcile.Reconciler
	if *mode == "noop" {
		primary = &Tiny{}
		r = reconcile.Func(func(context.Context, ctrl.Request) (ctrl.Result, error) { return ctrl.Result{}, nil })
	} else {
		primary = &Greeting{}
		r = &greetingReconciler{Client: mgr.GetClient(), scheme: scheme, childLabel: *childLabel}
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(primary).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(r); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}

	// A runnable starts once the cache has; asking the cache for the controller's informers then
	// waits for their first sync.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for _, obj := range []client.Object{primary, &corev1.ConfigMap{}} {
			if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
				return err
			}
		}
		fmt.Printf("{\"synced\":%.3f}\n", time.Since(started).Seconds())
		return nil
	})); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}
