// The real node's workload image: a static binary, the image's only file (test/e2e/node/node.sh).
//
//	workload              waits for SIGTERM (a container that uses nothing)
//	workload alloc MIB    writes MIB MiB of memory, one MiB a step, then waits: past its memory
//	                      limit the kernel's OOM killer ends it (exit 137, reason OOMKilled)
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

var held [][]byte

func main() {
	if len(os.Args) == 3 && os.Args[1] == "alloc" {
		mib, err := strconv.Atoi(os.Args[2])
		if err != nil || mib <= 0 {
			fmt.Fprintln(os.Stderr, "usage: workload alloc MIB")
			os.Exit(2)
		}
		for i := 0; i < mib; i++ {
			chunk := make([]byte, 1<<20)
			for j := range chunk {
				chunk[j] = byte(i + j)
			}
			held = append(held, chunk)
		}
		fmt.Printf("holding %d MiB\n", mib)
	} else if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: workload [alloc MIB]")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
