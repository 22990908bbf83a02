// Same main as k8s.io/kubernetes/cmd/kubelet/kubelet.go v1.37.2 (Apache-2.0, The Kubernetes Authors),
// built here from the Go module proxy for the real node (test/e2e/node/): the kubelet itself.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // for client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	command := app.NewKubeletCommand(context.Background())
	code := cli.Run(command)
	os.Exit(code)
}
