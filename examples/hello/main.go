// Command hello is a stand-in for a training job under the themis driver. It
// "trains" for a number of steps, checkpoints to $THEMIS_CHECKPOINT_DIR every
// few steps, on SIGUSR1 (and continues) and on SIGINT/SIGTERM (and exits 0),
// and resumes from its checkpoint when restarted. Tests parse its output:
//
//	hello: visible GPUs NVIDIA_VISIBLE_DEVICES=<v> CUDA_VISIBLE_DEVICES=<v>
//	hello: resumed from step N
//	hello: step i/N loss=<decreasing number>
//	hello: checkpointed at step N, exiting
//	hello: done
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

const checkpointFile = "hello.ckpt"

// checkpoint is what hello saves: the number of steps completed.
type checkpoint struct {
	Step int     `json:"step"`
	Loss float64 `json:"loss"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "hello: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("hello", flag.ContinueOnError)
	steps := flags.Int("steps", 100, "number of training steps")
	stepTime := flags.Duration("step-time", 100*time.Millisecond, "time one step takes")
	every := flags.Int("checkpoint-every", 10, "checkpoint every this many steps (0: only on signals and at the end)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *steps < 0 || *every < 0 || *stepTime < 0 {
		return errors.New("-steps, -step-time and -checkpoint-every must not be negative")
	}

	// Register before anything else so that no early signal kills us.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGINT, syscall.SIGTERM)

	fmt.Printf("hello: visible GPUs NVIDIA_VISIBLE_DEVICES=%s CUDA_VISIBLE_DEVICES=%s\n",
		os.Getenv("NVIDIA_VISIBLE_DEVICES"), os.Getenv("CUDA_VISIBLE_DEVICES"))

	dir := os.Getenv("THEMIS_CHECKPOINT_DIR")
	done := 0
	if dir != "" {
		ck, ok, err := load(filepath.Join(dir, checkpointFile))
		if err != nil {
			return err
		}
		if ok {
			done = min(ck.Step, *steps)
			fmt.Printf("hello: resumed from step %d\n", done)
		}
	} else {
		fmt.Println("hello: THEMIS_CHECKPOINT_DIR is not set; running without checkpoints")
	}

	save := func(step int) error {
		if dir == "" {
			return nil
		}
		return store(filepath.Join(dir, checkpointFile), checkpoint{Step: step, Loss: loss(step, *steps)})
	}

	tick := time.NewTicker(max(*stepTime, time.Nanosecond))
	defer tick.Stop()
	for done < *steps {
		select {
		case s := <-sigs:
			if err := save(done); err != nil {
				return err
			}
			if s == syscall.SIGUSR1 {
				if dir != "" {
					fmt.Printf("hello: checkpointed at step %d, continuing\n", done)
				}
				continue
			}
			if dir == "" {
				fmt.Printf("hello: stopped at step %d without a checkpoint, exiting\n", done)
			} else {
				fmt.Printf("hello: checkpointed at step %d, exiting\n", done)
			}
			return nil
		case <-tick.C:
		}
		done++
		fmt.Printf("hello: step %d/%d loss=%.4f\n", done, *steps, loss(done, *steps))
		if *every > 0 && done%*every == 0 {
			if err := save(done); err != nil {
				return err
			}
		}
	}
	if err := save(done); err != nil {
		return err
	}
	fmt.Println("hello: done")
	return nil
}

// loss falls from about 2.3 towards 0.1 as training progresses.
func loss(step, steps int) float64 {
	if steps <= 0 {
		return 0.1
	}
	return 0.1 + 2.2*math.Exp(-4*float64(step)/float64(steps))
}

func load(path string) (checkpoint, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("read checkpoint: %w", err)
	}
	var ck checkpoint
	if err := json.Unmarshal(b, &ck); err != nil {
		return checkpoint{}, false, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if ck.Step < 0 {
		return checkpoint{}, false, fmt.Errorf("checkpoint %s: negative step %d", path, ck.Step)
	}
	return ck, true, nil
}

// store writes the checkpoint atomically: a temporary file in the same
// directory, synced, then renamed over the old one.
func store(path string, ck checkpoint) error {
	b, err := json.Marshal(ck)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), checkpointFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("install checkpoint: %w", err)
	}
	return nil
}
