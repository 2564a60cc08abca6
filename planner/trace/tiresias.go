package trace

import (
	"time"
)

// VCDefault is the virtual cluster of jobs in traces that have none.
const VCDefault = "default"

// tiresias parses rows of the Tiresias simulator's job files, and of
// Muri's (Rivendile/Muri, simulator/trace-data/), which have the same
// columns and more, with times in milliseconds.
type tiresias struct {
	file string
	col  map[string]int
	// seen maps job ids to the line they were first defined on.
	seen map[string]int
	// ms: submit_time and duration are in milliseconds (Muri).
	ms bool
}

func newTiresias(file string, col map[string]int) rowParser {
	return &tiresias{file: file, col: col, seen: map[string]int{}}
}

// newMuri parses Muri's traces: Tiresias's columns with times in
// milliseconds, plus batch_size, iteration_time, resource_time_0..2 and
// priority, which the simulator does not use (they must still be numbers).
func newMuri(file string, col map[string]int) rowParser {
	return &tiresias{file: file, col: col, seen: map[string]int{}, ms: true}
}

func (p *tiresias) row(line int, rec []string) (Job, error) {
	f := fields{file: p.file, line: line, col: p.col, rec: rec}
	job := Job{Line: line, VC: VCDefault, Model: f.str("model_name")}
	var err error
	if job.ID, err = f.nonEmpty("job_id"); err != nil {
		return Job{}, err
	}
	if prev, dup := p.seen[job.ID]; dup {
		return Job{}, f.errorf("job_id", "%q is already used on line %d", job.ID, prev)
	}
	p.seen[job.ID] = line
	if job.GPUs, err = f.count("num_gpu", 1); err != nil {
		return Job{}, err
	}
	if job.Submit, err = f.seconds("submit_time"); err != nil {
		return Job{}, err
	}
	if job.Iterations, err = f.count("iterations", 0); err != nil {
		return Job{}, err
	}
	if job.Duration, err = f.seconds("duration"); err != nil {
		return Job{}, err
	}
	if p.ms {
		job.Submit /= 1000
		job.Duration /= 1000
		for _, c := range muriExtra {
			if _, err := f.number(c); err != nil {
				return Job{}, err
			}
		}
	}
	return job, nil
}

func (p *tiresias) finish(jobs []Job) time.Time {
	rebase(jobs)
	return time.Time{}
}
