// Same main as k8s.io/kubernetes/cmd/kubectl/kubectl.go of v1.32 (Apache-2.0, The Kubernetes Authors),
// built here from the Go module proxy for the end-to-end tests (KUBE=1.32). The newer main in cmd/kubectl
// calls cmd.GetLogVerbosity, which kubectl v0.32 lacks.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Pretty-print the error and exit with an error.
		util.CheckErr(err)
	}
}
