//go:build !linux || !cgo

package gputest

import "errors"

// ProcessGPUMemoryMiB needs NVML, through cgo on Linux.
func ProcessGPUMemoryMiB(int) (int64, bool, error) {
	return 0, false, errors.New("no NVML in this build")
}
