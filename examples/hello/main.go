// Command hello is a stand-in for a training job under the themis driver
// that follows its checkpoint protocol (docs/checkpoints.md). It "trains"
// for -steps steps, resumes from $THEMIS_RESUME_FROM, writes a checkpoint
// step-<N> (COMPLETE last) every -checkpoint-every steps and on SIGUSR1, and
// checkpoints and exits 0 on SIGINT, SIGTERM or the notice file. Flags that
// make it slow to checkpoint or deaf to the notice, and the output lines the
// tests parse: docs/checkpoints.md, "The example workload: hello".
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "hello: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	steps          int
	stepTime       time.Duration
	every          int
	checkpointTime time.Duration
	ignoreSignals  bool
}

func parseFlags(args []string) (options, error) {
	var o options
	flags := flag.NewFlagSet("hello", flag.ContinueOnError)
	flags.IntVar(&o.steps, "steps", 100, "number of training steps")
	flags.DurationVar(&o.stepTime, "step-time", 100*time.Millisecond, "time one step takes")
	flags.IntVar(&o.every, "checkpoint-every", 10, "checkpoint every this many steps (0: only on signals, the notice and at the end)")
	flags.DurationVar(&o.checkpointTime, "checkpoint-time", 0, "time one checkpoint takes")
	flags.BoolVar(&o.ignoreSignals, "ignore-signals", false, "ignore SIGINT, SIGTERM and the notice file (the driver must kill it)")
	if err := flags.Parse(args); err != nil {
		return o, err
	}
	if o.steps < 0 || o.every < 0 || o.stepTime < 0 || o.checkpointTime < 0 {
		return o, errors.New("-steps, -step-time, -checkpoint-every and -checkpoint-time must not be negative")
	}
	return o, nil
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	// Register before anything else so that no early signal kills us.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGINT, syscall.SIGTERM)

	fmt.Printf("hello: visible GPUs NVIDIA_VISIBLE_DEVICES=%s CUDA_VISIBLE_DEVICES=%s\n",
		os.Getenv("NVIDIA_VISIBLE_DEVICES"), os.Getenv("CUDA_VISIBLE_DEVICES"))
	if n, _ := strconv.Atoi(os.Getenv("THEMIS_RESTART_COUNT")); n > 0 {
		fmt.Printf("hello: restart count %d\n", n)
	}

	store := newStore(os.Getenv("THEMIS_CHECKPOINT_DIR"), o.checkpointTime)
	if store.dir != "" {
		// Under the themis driver the dir exists; under another driver
		// (docs/drivers.md) the job's first run creates it.
		if err := os.MkdirAll(store.dir, 0o700); err != nil {
			return err
		}
	}
	if store.dir == "" {
		fmt.Println("hello: THEMIS_CHECKPOINT_DIR is not set; running without checkpoints")
	}
	// A part of a multi-node gang: as in torch.distributed, rank 0 writes
	// the gang's checkpoints; every rank resumes from them.
	if size, _ := strconv.Atoi(os.Getenv("THEMIS_GANG_SIZE")); size > 1 {
		rank, _ := strconv.Atoi(os.Getenv("THEMIS_GANG_RANK"))
		fmt.Printf("hello: gang rank %d of %d, peers %s, master %s:%s, %s GPUs per node\n", rank, size,
			os.Getenv("THEMIS_GANG_PEERS"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("THEMIS_GPUS_PER_NODE"))
		store.readOnly = rank != 0
	}
	from, hasFrom := os.LookupEnv("THEMIS_RESUME_FROM")
	done, resumed, err := store.resume(from, hasFrom)
	if err != nil {
		return err
	}
	done = min(done, o.steps)
	if resumed {
		fmt.Printf("hello: resumed from step %d\n", done)
	}
	notice := os.Getenv("THEMIS_NOTICE_FILE")
	progress := os.Getenv("THEMIS_PROGRESS_FILE")

	tick := time.NewTicker(max(o.stepTime, time.Nanosecond))
	defer tick.Stop()
	for done < o.steps {
		select {
		case s := <-sigs:
			if s == syscall.SIGUSR1 {
				if err := store.save(done, o.steps); err != nil {
					return err
				}
				if store.dir != "" {
					fmt.Printf("hello: checkpointed at step %d, continuing\n", done)
				}
				continue
			}
			if o.ignoreSignals {
				fmt.Printf("hello: ignoring %s\n", signalName(s))
				continue
			}
			return store.exit(done, o.steps)
		case <-tick.C:
		}
		if !o.ignoreSignals {
			if n, ok := readNotice(notice); ok {
				fmt.Printf("hello: notice: %s, deadline %s\n", n.Reason, n.Deadline)
				return store.exit(done, o.steps)
			}
		}
		done++
		fmt.Printf("hello: step %d/%d loss=%.4f\n", done, o.steps, loss(done, o.steps))
		if !store.readOnly {
			reportProgress(progress, done, o.steps, loss(done, o.steps))
		}
		if o.every > 0 && done%o.every == 0 {
			if err := store.save(done, o.steps); err != nil {
				return err
			}
		}
	}
	if err := store.save(done, o.steps); err != nil {
		return err
	}
	fmt.Println("hello: done")
	return nil
}

func signalName(s os.Signal) string {
	if s, ok := s.(syscall.Signal); ok {
		switch s {
		case syscall.SIGINT:
			return "SIGINT"
		case syscall.SIGTERM:
			return "SIGTERM"
		}
	}
	return s.String()
}

// reportProgress tells the scheduler how far the job has come: the progress
// file (THEMIS_PROGRESS_FILE), replaced whole so the driver never reads a
// half-written one. Failures are not fatal: progress is advice.
func reportProgress(path string, done, steps int, loss float64) {
	if path == "" {
		return
	}
	b, _ := json.Marshal(map[string]any{"iteration": done, "total": steps, "loss": loss})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return
	}
	_ = os.Rename(tmp, path)
}
