// Command etcdmain is the real etcd server, built from the
// go.etcd.io/etcd/server/v3 module loopr's client is version-matched to.
// Tests build it (etcdtest.StartProcesses) to run etcd members as
// processes they can kill with SIGKILL; it takes etcd's own flags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
