// The real node's sandbox ("pause") image: containerd starts it as every pod's first process, to
// hold the pod's namespaces. No registry answers here, so it is built from this file (a static
// binary in an image of its own, test/e2e/node/node.sh) under the name containerd's sandbox_image
// gives. Like upstream's pause: waits for SIGINT or SIGTERM and exits 0; reaps orphaned children
// (it is PID 1 when the pod shares its process namespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
