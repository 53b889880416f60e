// Command kubectl is the kubectl matching the e2e server version (the
// preinstalled /usr/bin/kubectl tops out at 1.33).
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // exec/oidc auth providers
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectl "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Apply -v early so that command construction (kuberc, plugins) logs at
	// the requested verbosity.
	_, _ = logs.GlogSetter(kubectl.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
		cmdutil.CheckErr(err)
	}
}
