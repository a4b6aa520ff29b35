// Command etcd is etcd's own server entry point, built at the version that
// k8s.io/kubernetes pins so the API server and its store are a tested pair.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
