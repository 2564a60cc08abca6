// Package driver is the themis Nomad task driver: it runs a training process
// on the GPUs the planner granted to its job, and gives it what it needs to
// checkpoint and resume across preemptions.
//
// # Plugin config
//
// The binary is themis-driver; the agent config names it by that file name,
// while jobspecs use the driver name from PluginInfo, "themis":
//
//	plugin "themis-driver" {
//	  config {
//	    consul_address  = "127.0.0.1:8500"   # Consul holding the GPU leases
//	    consul_token    = "..."   # Consul ACL token (examples/acl/driver.consul.hcl; default $CONSUL_HTTP_TOKEN)
//	    lease_check     = true               # refuse tasks whose GPUs are not leased to them
//	    checkpoint_root = "/var/lib/themis/checkpoints"  # root's; refused when a user could swap it
//	    keep_checkpoints = 3     # complete checkpoints kept per task (>= 1)
//	    dynamic_user_min = 90000 # each allocation runs as a uid of its own from this range
//	    dynamic_user_max = 99999
//	    default_user    = ""        # set: tasks that name no `user` run as it instead
//	    allowed_users   = []        # "<namespace>/<user>" (or "*/<user>") a task's `user` may name
//	    supplementary_groups = []   # groups every task is in besides its own; none by default
//	    allow_root_jobs = []        # a namespace, "<namespace>/<job>", or "*": may run as root
//	    advertise_address = "10.0.0.5"  # where a gang's other parts reach this node (default: the default route's source)
//	    gang_timeout    = "5m"      # how long a gang's part waits for the others (docs/gangs.md)
//	    allow_devices   = ["/dev/infiniband"]  # device files (or dirs of them) every task may open besides its own GPUs'
//	  }
//	}
//
// # Task config
//
//	task "train" {
//	  driver = "themis"
//	  config {
//	    command = "hello"          # required; relative: task dir first, then PATH
//	    args    = ["-steps", "500"]
//	    themis {                   # required; see planner/spec
//	      gpus         = 2         # required
//	      vc           = "research"
//	      class        = "be"      # "be" or "te"
//	      priority     = 0         # -1 = opportunistic
//	      grace_period = "2m"
//	      checkpoint_signal = "SIGTERM"  # sent on stop; Nomad's kill_signal is not used
//	    }
//	  }
//	  resources { device "themis/gpu" { count = 2 } }
//	}
//
// The stanza is validated by spec.Stanza.Intent, the same code the planner
// uses; a bad stanza fails the task with an error naming the field, e.g.
// "themis.class: must be "be" (best effort) or "te" (trial and error), got "x"".
//
// # Lease check
//
// With lease_check on (the default), StartTask enforces invariant 1 (no themis
// task runs on a GPU it holds no lease for) before it starts anything:
//
//  1. The themis GPU instances Nomad allocated to the task (devices of vendor
//     "themis", type "gpu") must number exactly the stanza's gpus; otherwise
//     the task was placed without a planner grant and is refused. Nomad's
//     driver protocol does not carry device allocations to an external
//     driver (TaskConfig.Resources.NomadResources.Devices arrives empty), so
//     the IDs are read from THEMIS_GPU_IDS in TaskConfig.DeviceEnv, which the
//     themis device plugin's Reserve sets and a jobspec's env cannot.
//  2. Each GPU's lease is read from Consul KV at lease.GPUKey(id), and
//     lease.Verify checks that every one is leased to the task's namespace and
//     job. A missing lease or one held by another job refuses the task for
//     good; a failure to read Consul is returned as a recoverable error, so
//     Nomad's restart policy retries.
//
// The reader sits behind LeaseReader (ConsulLeases by default). While lease
// checking is on and Consul cannot be reached, the driver fingerprints as
// unhealthy, so Nomad places no themis task on the client; it re-checks every
// fingerprint period (30s).
//
// # Process and environment
//
// Tasks run through Nomad's executor (drivers/shared/executor), as with the
// exec and raw_exec drivers: per task the driver starts an executor, which
// is this binary re-executed as "themis-driver executor <config>" (the
// executor package's init serves it before main runs). The executor starts
// the command in the task dir as the leader of its own process group, with
// stdout and stderr on Nomad's log FIFOs, and:
//
//   - as the task's identity (user.go, identity.go, runas.go): by default a
//     dynamic uid that its allocation holds from its first task's start to
//     its last task's end, from dynamic_user_min..dynamic_user_max (as
//     Nomad's exec2 does), its group the same number, its home the task
//     dir, no supplementary groups but supplementary_groups; so two jobs
//     cannot signal each other, read each other's /proc, checkpoints or
//     task dirs. The uid is claimed in the checkpoint root
//     (<root>/.themis/uids/<uid>/<alloc>.<task>), so clients sharing the
//     root never give one uid to two allocations; a gang's ranks share
//     rank 0's (one checkpoint dir). A task's `user` is honoured only
//     where allowed_users lists it for the task's namespace; root (uid 0)
//     only where allow_root_jobs names the namespace or the job; the error
//     names the field. default_user, when set, replaces the dynamic uid.
//     The executor gets no user: it starts the run-as shim (this binary,
//     "themis-run-as"), which sets exactly those ids and no_new_privs and
//     execs the command, because Nomad's executor adds group 0 to every
//     user it runs (setCmdUser in drivers/shared/executor/executor_unix.go
//     of Nomad 1.11.3 makes its group slice with its length, then appends)
//     and cannot run a uid /etc/passwd does not name. The task's
//     environment reaches the shim in a root-only file of the alloc dir,
//     not through the root executor (a job's LD_PRELOAD would run as
//     root). The executor's TaskDir is a path below /proc (it looks the
//     command up in <TaskDir>/local first and chmods what it finds, as
//     root), its log is in the alloc dir (it opens it as root). The task
//     dir is the task's uid's, 0700. Only a driver running as root can
//     switch users: otherwise tasks run as the driver's user, and a task
//     that names another user is refused.
//   - in the cgroups the Nomad client made for the task, with its cpu shares
//     and memory limit, where the client can (root, cgroups v1 or v2). The
//     fingerprint says what holds: driver.themis.cgroups ("v1", "v2", "off"),
//     driver.themis.resource_limits, driver.themis.user_isolation and
//     driver.themis.device_isolation (below), and the health description
//     says when tasks run without limits or fence, and why. A task
//     the kernel kills for its memory limit exits with OOMKilled set (the
//     driver reads oom_kill from the task's memory cgroup, which the executor
//     does not), and Nomad records "OOM Killed".
//
// The executor needs the Nomad client's cgroup parents (/nomad under the
// freezer, memory, cpu and cpuset controllers on cgroups v1, nomad.slice
// on v2), which a client makes when it starts; on a host where none has
// run (the driver harness in tests, a fresh CI machine) every task failed
// with "open /sys/fs/cgroup/freezer/nomad/cgroup.procs: no such file or
// directory". Where any is missing, the driver makes them the way the
// client does (cgroupslib.Init and the cpuset partitions), at every
// fingerprint and before every task; where it cannot, the fingerprint is
// unhealthy ("tasks cannot start: cgroup parent ... is missing and cannot
// be made: ...") and StartTask fails with the same reason
// (cgroup_parent.go, TestCgroupParentMissing).
//
// # GPU device isolation
//
// A task may open only its own device files: runc's default list
// (/dev/null, zero, full, random, urandom, tty, ptmx, /dev/pts/*,
// /dev/net/tun), the files the device plugins reserved for the instances
// Nomad allocated to it (TaskConfig.Devices, from Reserve's DeviceSpecs:
// for themis GPUs their /dev/nvidia<minor>, a MIG instance's
// /dev/nvidia-caps files, and nvidiactl, nvidia-uvm, nvidia-uvm-tools and
// nvidia-modeset), and allow_devices; opening any other device file, every
// other GPU's among them, fails with EPERM whatever the task's user. This is
// the list Nomad's exec driver gives its tasks, and what the NVIDIA
// container toolkit does for containers: NVIDIA_VISIBLE_DEVICES and
// CUDA_VISIBLE_DEVICES tell CUDA which GPUs to use; the device cgroup is
// the fence. devices.go builds the list, device_fence.go sets it with
// runc's own code (github.com/opencontainers/cgroups/devices):
//
//   - cgroups v1: a devices cgroup of the driver's,
//     /sys/fs/cgroup/devices/nomad/<alloc>.<task> (Nomad makes none),
//     denying all but the list; the task's executor is moved into it
//     before it starts the task, which is born in it; removed when the
//     task has exited (or, left over, by the fingerprint's sweep).
//   - cgroups v2: an eBPF program (BPF_PROG_TYPE_CGROUP_DEVICE) allowing only
//     the list, attached to the cgroup the Nomad client made for the task
//     before the executor starts the task in it.
//
// The fingerprint attribute driver.themis.device_isolation says whether
// tasks are fenced; they are not where the driver is not root, cgroups are
// off, the driver runs in a user namespace, or (v1) the devices controller
// is not mounted, and the health description says so. A reserved file that
// is not a character or block device (symlinks are not followed) fails the
// task, naming it. A task running as root (allow_root_jobs) could move
// itself out of a v1 devices cgroup; the fence holds for other users.
// Files must exist when the task starts: a device file made later (say,
// /dev/nvidia-uvm, which nvidia-modprobe makes the first time CUDA runs)
// is refused; load the modules at boot. Tests: TestGPUDeviceIsolation
// (through StartTask, with device nodes mknod'ed with NVIDIA's major 195),
// TestDeviceFenceV2 (the eBPF program on a cgroup2 hierarchy, also the
// unified one of a v1 host), TestTaskDeviceRules.
//
// What it costs: setting a fence takes 0.10 ms on v1 and 0.22 ms on v2
// (BenchmarkDeviceFence, the cgroup made and removed included), next to
// some 30 ms for StartTask through the driver harness, where it does not
// show: medians of 20 starts (TestStartLatency, a task reserved two GPUs
// and the shared files) 33.0, 25.6 and 35.9 ms without the fence (the
// driver before it), 33.4, 31.0, 32.9, 32.9 and 31.0 ms with it; root,
// cgroups v1, the 2-core dev VM shared with other work, Nov 2026.
//
// The environment is Nomad's task environment plus:
//
//	THEMIS_JOB_ID          the Nomad job ID
//	THEMIS_VC              virtual cluster
//	THEMIS_CLASS           "be" or "te"
//	THEMIS_PRIORITY        priority inside the VC
//	THEMIS_GPUS            number of GPUs granted
//	THEMIS_GPU_IDS         comma-separated GPU instance IDs Nomad allocated
//	THEMIS_GRACE_PERIOD    grace period in seconds (e.g. "30", "1.5")
//	THEMIS_CHECKPOINT_DIR  <checkpoint_root>/<namespace>/<job>/<group>/<task>
//	THEMIS_RESUME_FROM     newest complete checkpoint in it; "" on a first start
//	THEMIS_RESTART_COUNT   times the job was preempted and resumed (job meta
//	                       themis.restart_count, which Nomad passes as
//	                       NOMAD_META_themis.restart_count); "0" when missing
//	THEMIS_NOTICE_FILE     <checkpoint dir>/notice.json, written on stop
//
// The checkpoint dir lives outside the alloc dir, so a job re-placed on the
// same node after preemption finds its checkpoints and resumes. It is 0700
// and owned by the task's user; the dirs above it are root's and 0711, so a
// task reaches its own dir without listing other jobs. The driver never
// follows a path a job could shape (package nofollow, ckptdir.go): the
// root must be root's and not writable by others (else the fingerprint is
// unhealthy naming it), every component below it is opened with
// O_NOFOLLOW and checked, the dir is handed to a new allocation's uid on
// its open descriptor with what earlier uids wrote in it (no symlink's
// target, no hard link from elsewhere), and goes back to root, 0700, when
// the allocation releases its uid. The notice file, the progress file
// (regular, at most 64 KiB, the task's own, opened non-blocking), pruning
// and the newest checkpoint are read and written as the task's uid
// (setfsuid on a locked thread, asuser.go).
//
// # Checkpoint protocol
//
// docs/checkpoints.md is the whole contract; in short:
//
//   - A checkpoint is a subdirectory of THEMIS_CHECKPOINT_DIR, complete once
//     the workload has written a COMPLETE file into it last; newest is by the
//     marker's modification time, then by name (package checkpoint, whose
//     Latest the planner and Go workloads can use too). Incomplete ones are
//     never handed back.
//   - At start the driver removes a stale notice file, prunes the dir to the
//     newest keep_checkpoints complete checkpoints (and incomplete leftovers
//     older than the newest complete one), and sets THEMIS_RESUME_FROM. It
//     prunes again when the task's process exits.
//   - StopTask waits the stanza's grace_period, or Nomad's timeout
//     (min(kill_timeout, max_kill_timeout)) when that is shorter, with a
//     warning and a task event saying by how much the grace was cut. It writes
//     the notice file {"reason", "deadline" (RFC 3339), "signal"}, the reason
//     being the job lease's revoke reason (read best effort from Consul,
//     within a second) or "stopped by Nomad"; sends checkpoint_signal to the
//     whole process group; waits until the process exits or the deadline
//     passes; then sends SIGKILL to the group.
//
// # Signals, recovery, stats
//
// SignalTask sends a signal to the whole process group; DestroyTask kills
// whatever is left of the group after its leader exited. Task stats come from
// the executor (the task's cgroup where there is one, else its processes).
//
// The task handle records the executor's reattach config and the task's part
// of the checkpoint protocol. After a driver restart RecoverTask re-attaches
// to the executor, which kept running the process as its child, so the exit
// code Nomad records is the real one. When the executor is gone RecoverTask
// fails and Nomad restarts the task. A task's exit is reported before its
// executor is stopped: go-plugin learns that a re-attached executor (not the
// driver's child) has exited only by polling its pid once a second, and
// gives it 2 s before killing it, so stopping it first made a recovered
// task's exit reach Nomad 1.0 s late in TestRecoverTask_ExitPrompt and
// 2.1 s late in the e2e TestClientRestartRecoversTask (now about 1 ms, and
// before the e2e test's 10 ms poll sees the process gone). DestroyTask waits
// for that one stop, so no executor is left (figures and commands:
// docs/design.md, e2e section).
//
// # What the executor gave, what stayed custom
//
// From the executor: starting the process as another user, cgroup limits,
// the process as its child across driver restarts (re-attach, real exit
// codes), resource usage, SIGKILL of the process group on Shutdown.
// Custom: the checkpoint protocol's signal goes to the whole process group
// (the executor's Signal reaches the leader only, and its Shutdown waits a
// grace of its own without the notice file, the grace cut or the events), so
// StopTask signals the group itself and calls Shutdown("SIGKILL", 0) only at
// the deadline; OOM detection from the memory cgroup; reaping a group whose
// leader exited on its own; the user policy (default_user, allow_root_jobs);
// checkpoint dirs; the device fence (the executor sets no device cgroup:
// only Nomad's libcontainer executor, for the exec driver, does). The
// executor's chroot (FSIsolation) is not used: a training task needs the
// host's CUDA libraries and datasets. Size of the
// driver package without tests: 1,799 lines before the executor, 1,978
// after; the process code (handle.go, proc.go) went from 452 to 284 lines,
// and users, OOM detection and the isolation fingerprint were added.
package driver
