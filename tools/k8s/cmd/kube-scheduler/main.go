// Command kube-scheduler is the stock upstream scheduler (no out-of-tree
// plugins). Troupe is attached to it purely through the extender section of
// the KubeSchedulerConfiguration.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build-info metric
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
}
