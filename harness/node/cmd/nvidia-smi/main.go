// Command nvidia-smi is the mock driver root's nvidia-smi (harness/node.py): it appends its arguments, one call per
// line, to the file $GPUC_NVIDIA_SMI_LOG names and succeeds. The kubelet plugin runs nvidia-smi with LD_PRELOAD naming
// the driver root's NVML library (the mock, a Go c-shared library): built static (CGO_ENABLED=0), this program loads no
// shared library at all, so the preload cannot disturb it.
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

func main() {
	path := os.Getenv("GPUC_NVIDIA_SMI_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nvidia-smi (harness recorder): %v\n", err)
		os.Exit(1)
	}
	defer f.Close()
	// one write per call, under an exclusive lock: two plugins of a node may call at once
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintf(os.Stderr, "nvidia-smi (harness recorder): %v\n", err)
		os.Exit(1)
	}
	if _, err := f.WriteString(strings.Join(os.Args[1:], " ") + "\n"); err != nil {
		fmt.Fprintf(os.Stderr, "nvidia-smi (harness recorder): %v\n", err)
		os.Exit(1)
	}
}
