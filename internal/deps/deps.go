// Package deps pins the project's direct dependencies while the packages that use them are written.
package deps

import (
	_ "cuelang.org/go/cue/cuecontext"
	_ "github.com/go-redis/redis/v8"
	_ "github.com/looplab/fsm"
	_ "github.com/onsi/gomega"
	_ "k8s.io/api/apps/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
