// Command kube-controller-manager is the upstream controller manager (Job,
// ServiceAccount token, garbage-collector and the other in-tree controllers;
// no cloud provider), so the e2e control plane runs Jobs as users submit them.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones without a system tzdata

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build-info metric
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
}
