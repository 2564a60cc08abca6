// Package gpususpend suspends a CUDA process in place: its GPU memory is
// copied to host memory and the GPU is left free, while the process itself
// stays alive; resuming copies the memory back and lets the process go on
// from the instruction it was at. It is a thin binding of the CUDA driver's
// process-checkpoint API (libcuda.so.1, driver 550 and later; public in the
// CUDA 12.8 headers):
//
//	cuCheckpointProcessLock        block the process's further CUDA calls and
//	                               wait (up to a timeout) for its work to drain
//	cuCheckpointProcessCheckpoint  copy its device memory to host, release the GPU
//	cuCheckpointProcessRestore     take the GPU again, copy the memory back
//	cuCheckpointProcessUnlock      let its CUDA calls run again
//	cuCheckpointProcessGetState    RUNNING, LOCKED, CHECKPOINTED or FAILED
//
// The calls act on another process, named by pid, and need the rights to
// trace it (the same user, or root: the themis driver runs as root). They
// do not stop the process's CPU threads: a thread that makes a CUDA call
// while the process is locked or checkpointed blocks in that call until it
// is unlocked. Host memory must hold the GPU memory while checkpointed; it
// is the process's own (counted in its memory cgroup).
//
// Suspend and Resume order the calls and undo a half-done suspend (unlock
// when the checkpoint fails); Library is the real library, loaded with
// dlopen so that binaries built with cgo still start on machines with no
// NVIDIA driver (Open then says why it cannot be used). docs/checkpoints.md,
// "GPU suspend in place", gives the figures measured on an H200 and why the
// driver does not yet offer it as a preemption mode.
package gpususpend
