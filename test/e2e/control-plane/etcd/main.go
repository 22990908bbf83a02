// etcd server for the end-to-end tests, built from the Go module proxy.
// Same entry point as go.etcd.io/etcd/server/v3's own main (server/main.go).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
