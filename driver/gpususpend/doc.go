// Package gpususpend suspends a CUDA process in place: its GPU memory is
// copied to host memory and the GPU is left free, while the process itself
// stays alive; resuming copies the memory back and lets it go on. It is a
// thin binding of the CUDA driver's process-checkpoint API (libcuda.so.1,
// driver 550 and later), acting on another process by pid.
//
// Suspend and Resume order the calls and undo a half-done suspend; Library
// is the real library, loaded with dlopen so that binaries still start
// where there is no NVIDIA driver (Open says why it cannot be used). The
// calls, what they need and block, the figures measured on an H200 and why
// the driver does not offer it as a preemption mode yet:
// docs/checkpoints.md, "GPU suspend in place".
package gpususpend
