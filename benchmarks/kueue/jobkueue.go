// jobkueue: Kueue's scheduler and core controllers with the batch/Job integration, for
// benchmarks/bench_vs_kueue.py (issue 20). Written for TiHub against Kueue's packages; built inside a copy of
// Kueue's module by tests/k8s/build-kueue.sh.
//
// Why not cmd/kueue: it always starts the webhook server and a metrics server whose certificates it reads
// from fixed paths, and the benchmark registers no webhooks (Jobs are created suspended, with their queue
// label). Why not Kueue's minimalkueue: it has no Job integration and fixes its client at 50 QPS / burst 100.
// Everything that decides admission here is Kueue's own code, with its defaults, as cmd/kueue sets it up.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuealpha "sigs.k8s.io/kueue/apis/kueue/v1alpha1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/controller/jobs/job"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/kubeversion"
)

var (
	// as Kueue's shipped config/components/manager/controller_manager_config.yaml (its code's defaults: 20/30)
	qps   = flag.Float64("qps", 50, "client QPS")
	burst = flag.Int("burst", 100, "client burst")
	// Kueue's default controller concurrency (config/components/manager/controller_manager_config.yaml)
	jobConcurrency      = flag.Int("job-concurrency", 5, "concurrent reconciles of Jobs")
	workloadConcurrency = flag.Int("workload-concurrency", 5, "concurrent reconciles of Workloads")
)

func main() {
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jobkueue:", err)
		os.Exit(1)
	}
}

func run() error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	utilruntime.Must(kueuealpha.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	gk := func(kind string) string { return kueue.GroupVersion.WithKind(kind).GroupKind().String() }
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Controller: crconfig.Controller{GroupKindConcurrency: map[string]int{
			"Job.batch": *jobConcurrency, gk("Workload"): *workloadConcurrency,
			gk("LocalQueue"): 1, gk("ClusterQueue"): 1, gk("ResourceFlavor"): 1,
		}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		sig := make(chan os.Signal, 2)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		cancel()
	}()

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	versions := kubeversion.NewServerVersionFetcher(dc)
	if err := versions.FetchServerVersion(); err != nil {
		return fmt.Errorf("server version: %w", err)
	}

	frameworks := []string{job.FrameworkName}
	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexes: %w", err)
	}
	if err := jobframework.SetupIndexes(ctx, mgr.GetFieldIndexer(), jobframework.WithEnabledFrameworks(frameworks)); err != nil {
		return fmt.Errorf("job indexes: %w", err)
	}

	cache := schdcache.New(mgr.GetClient())
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		return err
	}
	expectations := preemptexpectations.New()
	queues := qcache.NewManager(mgr.GetClient(), cache, requeuer, qcache.WithPreemptionExpectations(expectations))
	go queues.CleanUpOnContext(ctx)
	go cache.CleanUpOnContext(ctx)

	kcfg := &configapi.Configuration{}
	if name, err := core.SetupControllers(mgr, queues, cache, kcfg, nil, expectations, nil); err != nil {
		return fmt.Errorf("controller %s: %w", name, err)
	}
	jobOpts := []jobframework.Option{
		jobframework.WithManageJobsWithoutQueueName(false),
		jobframework.WithKubeServerVersion(versions),
		jobframework.WithEnabledFrameworks(frameworks),
		jobframework.WithManagerName(constants.KueueName),
		jobframework.WithCache(cache),
		jobframework.WithQueues(queues),
		jobframework.WithManagedJobsNamespaceSelector(labels.Everything()),
	}
	rec, err := job.NewReconciler(ctx, mgr.GetClient(), mgr.GetFieldIndexer(),
		mgr.GetEventRecorderFor(fmt.Sprintf("%s-%s-controller", job.FrameworkName, constants.KueueName)), jobOpts...)
	if err != nil {
		return fmt.Errorf("job reconciler: %w", err)
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("job controller: %w", err)
	}
	sched := scheduler.New(queues, cache, mgr.GetClient(), mgr.GetEventRecorderFor(constants.AdmissionName),
		scheduler.WithPreemptionExpectations(expectations))
	if err := mgr.Add(sched); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "jobkueue: %s qps=%v burst=%d\n", cfg.Host, cfg.QPS, cfg.Burst)
	return mgr.Start(ctx)
}
