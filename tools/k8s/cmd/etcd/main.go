// Command etcd runs the etcd server at the version k8s.io/apiserver already
// depends on, so no extra modules are needed.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
