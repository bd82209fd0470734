// Command etcd is etcd's own server entry point, built from go.etcd.io/etcd/server/v3 at the
// version k8s.io/kubernetes pins, because Debian's etcd is older than this apiserver needs.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
