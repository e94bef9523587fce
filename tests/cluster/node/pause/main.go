// pause: the sandbox ("infra") container of every pod on the real test node.
//
// Kubernetes' own pause is C (build/pause/linux/pause.c) and ships only as an image on registry.k8s.io, which
// cannot be pulled here; this is the same behaviour in Go, built by tests/cluster/build-node.sh into a
// FROM-scratch image: hold the pod's namespaces open, exit 0 on SIGINT/SIGTERM (so a sandbox stops at once
// instead of waiting for SIGKILL), and reap zombies, since it is PID 1 of the pod when the process namespace is
// shared.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (dreamkeeper test node)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", sig)
		os.Exit(0)
	}
}

// reap collects every exited child: orphans re-parented to PID 1 must not stay zombies.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
