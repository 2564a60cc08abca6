package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/themis-nomad/themis/driver/checkpoint"
)

// checkpointFile is the file inside each checkpoint directory.
const checkpointFile = "hello.ckpt"

// state is what hello saves: the number of steps completed.
type state struct {
	Step int     `json:"step"`
	Loss float64 `json:"loss"`
}

// store writes and reads hello's checkpoints in dir ("" = no checkpoints).
type store struct {
	dir   string
	cost  time.Duration // how long writing one checkpoint takes
	saved int           // the step of the newest checkpoint, -1 for none
	// readOnly resumes from checkpoints but writes none (a gang's rank
	// other than 0, whose rank 0 writes the gang's checkpoints).
	readOnly bool
}

func newStore(dir string, cost time.Duration) *store {
	return &store{dir: dir, cost: cost, saved: -1}
}

// resume loads the checkpoint to resume from: from when the driver set
// THEMIS_RESUME_FROM (hasFrom; empty means a first start), else the newest
// complete checkpoint in dir.
func (s *store) resume(from string, hasFrom bool) (step int, ok bool, err error) {
	if !hasFrom && s.dir != "" {
		c, found, err := checkpoint.Latest(s.dir)
		if err != nil {
			return 0, false, err
		}
		if found {
			from = c.Path
		}
	}
	if from == "" {
		return 0, false, nil
	}
	b, err := os.ReadFile(filepath.Join(from, checkpointFile))
	if err != nil {
		return 0, false, fmt.Errorf("read checkpoint: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, false, fmt.Errorf("checkpoint %s: %w", from, err)
	}
	if st.Step < 0 {
		return 0, false, fmt.Errorf("checkpoint %s: negative step %d", from, st.Step)
	}
	s.saved = st.Step
	return st.Step, true, nil
}

// save writes a complete checkpoint of step, unless the newest one already
// holds it.
func (s *store) save(step, steps int) error {
	if s.dir == "" || step == s.saved || s.readOnly {
		return nil
	}
	name := fmt.Sprintf("step-%09d", step)
	if _, err := os.Lstat(filepath.Join(s.dir, name)); err == nil {
		// Resumed from an older checkpoint than one of this step: keep both.
		name = fmt.Sprintf("%s.%d", name, time.Now().UnixNano())
	}
	_, err := checkpoint.Save(s.dir, name, func(tmp string) error {
		b, err := json.Marshal(state{Step: step, Loss: loss(step, steps)})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, checkpointFile), b, 0o600); err != nil {
			return err
		}
		time.Sleep(s.cost)
		return nil
	})
	if err != nil {
		return err
	}
	s.saved = step
	return nil
}

// exit checkpoints and says so, for a stop (signal or notice).
func (s *store) exit(step, steps int) error {
	if err := s.save(step, steps); err != nil {
		return err
	}
	switch {
	case s.dir == "":
		fmt.Printf("hello: stopped at step %d without a checkpoint, exiting\n", step)
	case s.readOnly:
		fmt.Printf("hello: stopped at step %d (rank 0 checkpoints the gang), exiting\n", step)
	default:
		fmt.Printf("hello: checkpointed at step %d, exiting\n", step)
	}
	return nil
}

// notice is the part of the driver's notice file hello reads.
type notice struct {
	Reason   string `json:"reason"`
	Deadline string `json:"deadline"`
}

// readNotice reports whether the notice file exists and holds a notice.
func readNotice(path string) (notice, bool) {
	if path == "" {
		return notice{}, false
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || len(b) == 0 {
		return notice{}, false
	}
	var n notice
	if err != nil || json.Unmarshal(b, &n) != nil {
		n.Reason = "unreadable notice file"
	}
	return n, true
}

// loss falls from about 2.3 towards 0.1 as training progresses.
func loss(step, steps int) float64 {
	if steps <= 0 {
		return 0.1
	}
	return 0.1 + 2.2*math.Exp(-4*float64(step)/float64(steps))
}
