package framework

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RESTConfig is the devcluster's admin config.
func (s *Stack) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s: %w", s.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Client is a controller-runtime client with the built-in types; RedisCluster is read as
// unstructured (see RedisClusterGVK) so the harness does not depend on the api package.
// It is made once per Stack: a new client looks up the API's resources again on its
// first request of each kind, and the harness polls several times a second.
func (s *Stack) Client() (client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	s.client = c
	return c, nil
}

// Clientset is a client-go clientset for the devcluster.
func (s *Stack) Clientset() (kubernetes.Interface, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
