// Command etcd is etcd's own server entry point (what the etcd release binary runs), built from
// the published go.etcd.io/etcd/server/v3 module: the repository's root module, which holds the
// release's main package, replaces its sibling modules with directories and so cannot be
// required. scripts/kube-test-cluster builds it and stamps the version with -ldflags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
