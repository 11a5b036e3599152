// Command etcd is the etcd server the test API servers store their objects in: etcd's own
// entry point, built from the Go module proxy at the version harness/versions.env pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
