// Command kube-apiserver is the upstream Kubernetes API server, built from the
// Go module proxy for Troupe's local e2e control plane.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones without a system tzdata

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build-info metric
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
}
