package trace

import (
	"strconv"
	"time"
)

// phillyTime is the layout of the Philly trace's timestamp column (UTC).
const phillyTime = "2006-01-02 15:04:05"

// philly parses rows of the Philly trace. Submit holds Unix seconds until
// finish re-bases it on the earliest timestamp.
type philly struct {
	file string
	col  map[string]int
}

func newPhilly(file string, col map[string]int) rowParser { return &philly{file: file, col: col} }

func (p *philly) row(line int, rec []string) (Job, error) {
	f := fields{file: p.file, line: line, col: p.col, rec: rec}
	job := Job{Line: line, ID: "philly-" + strconv.Itoa(line)}
	ts := f.str("timestamp")
	t, err := time.Parse(phillyTime, ts)
	if err != nil {
		return Job{}, f.errorf("timestamp", "%q is not a UTC time YYYY-MM-DD hh:mm:ss", ts)
	}
	job.Submit = float64(t.Unix())
	if job.Duration, err = f.seconds("duration"); err != nil {
		return Job{}, err
	}
	if job.GPUs, err = f.count("num_gpus", 1); err != nil {
		return Job{}, err
	}
	if job.VC, err = f.nonEmpty("cluster"); err != nil {
		return Job{}, err
	}
	return job, nil
}

func (p *philly) finish(jobs []Job) time.Time {
	first := rebase(jobs)
	return time.Unix(int64(first), 0).UTC()
}
