//go:build linux && cgo

package gputest

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ProcessGPUMemoryMiB is the GPU memory NVML counts for process pid, summed
// over the node's GPUs; ok is false where NVML cannot say (no NVML, or no
// GPU lists the process: a process with no GPU memory is not listed).
func ProcessGPUMemoryMiB(pid int) (mib int64, listed bool, err error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return 0, false, ret
	}
	defer lib.Shutdown()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, false, ret
	}
	for i := range n {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return 0, false, ret
		}
		procs, ret := dev.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			return 0, false, ret
		}
		for _, p := range procs {
			if int(p.Pid) == pid {
				listed = true
				mib += int64(p.UsedGpuMemory >> 20)
			}
		}
	}
	return mib, listed, nil
}
