// kube-network-policies' controller as a host process of hack/realnode: the upstream package with a main
// that reads a kubeconfig (upstream's main only knows the in-cluster config of a DaemonSet pod).
package main

import (
	"context"
	"flag"
	"net/http"
	"os"
	"os/signal"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the controller's client")
	node := flag.String("hostname-override", "", "the Node this controller enforces policies on")
	queue := flag.Int("nfqueue-id", 100, "the nfqueue the node's packets are sent to")
	metrics := flag.String("metrics-bind-address", "127.0.0.1:0", "where /metrics is served")
	klog.InitFlags(nil)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	http.Handle("/metrics", promhttp.Handler())
	go func() { klog.Info(http.ListenAndServe(*metrics, nil)) }()
	ctrl, err := networkpolicy.NewController(clientset,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(), factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{QueueID: *queue, NodeName: *node, NRIdisabled: true})
	if err != nil {
		klog.Fatalf("controller: %v", err)
	}
	go func() {
		if err := ctrl.Run(ctx); err != nil {
			klog.Errorf("controller: %v", err)
			cancel()
		}
	}()
	factory.Start(ctx.Done())
	<-ctx.Done()
}
