// Same main as k8s.io/kubernetes/cmd/kubemark/hollow-node.go (Apache-2.0, The Kubernetes Authors),
// built here from the Go module proxy for the end-to-end tests: `kubemark --morph=kubelet` is the
// kubelet's own code (status loop, node status setters, pod admission, pod workers) over a fake
// container runtime and a fake cAdvisor.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/restclient"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration
	"k8s.io/kubernetes/cmd/kubemark/app"
)

func main() {
	command := app.NewHollowNodeCommand()
	code := cli.Run(command)
	os.Exit(code)
}
