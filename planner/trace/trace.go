package trace

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Job is one job of a trace: a gang that needs GPUs GPUs for Duration seconds
// of execution at full speed.
type Job struct {
	// Line is the job's line in the trace file (1 is the header).
	Line int
	// ID names the job uniquely within the trace.
	ID string
	// Submit is when the job arrives, in seconds since the earliest
	// submission in the trace.
	Submit float64
	// Duration is the job's execution time in seconds (may be 0).
	Duration float64
	// GPUs is the gang size, always positive.
	GPUs int
	// VC is the job's virtual cluster (tenant).
	VC string
	// Model is the DL model's name, "" if the trace has none.
	Model string
	// Iterations is the number of training iterations, 0 if the trace has
	// none.
	Iterations int
	// Class is the job's class in the FitGpp sense: "te" (trial and error,
	// to start quickly) or "be" (best effort, may be preempted); "" when the
	// trace does not say. The CSV formats have no such column.
	Class string
	// CPUs is the number of CPUs the job requests on its node, 0 when the
	// trace does not say.
	CPUs float64
	// MemoryGB is the memory the job requests on its node, in GB, 0 when the
	// trace does not say.
	MemoryGB float64
	// GracePeriod is how long, in seconds, the job may take to suspend
	// (checkpoint) once told it is preempted; 0 when the trace does not say.
	GracePeriod float64
	// App names the app the job belongs to in the Themis sense (NSDI'20,
	// section 2.1): a set of related jobs, e.g. the trials of one
	// hyper-parameter sweep, training one model, that finishes when its last
	// job does. "" when the trace does not say (every job its own app). The
	// CSV formats have no such column; the generators of package workload
	// set it.
	App string
	// Phase is the job's successive-halving phase (NSDI'20, section 4.3.2),
	// 1 for the first, when its App is a successive-halving sweep; 0
	// otherwise. A job of phase p > 1 is a survivor of phase p-1 and may
	// start only once every job of phase p-1 of its App has finished; its
	// Submit is the App's arrival, like every job of the App. Phases are
	// numbered 1, 2, ... without gaps.
	Phase int
	// Attained and Executed are the service the job already received
	// before the trace begins (GPU-seconds, and seconds run): a trace taken
	// from a live cluster (themis sim --from-live) starts with its jobs
	// part-way. Duration is then the work left. 0 in the CSV formats.
	Attained, Executed float64
}

// Trace is a loaded trace.
type Trace struct {
	// Name is the trace file's base name.
	Name string
	// Format is the detected format: FormatPhilly, FormatTiresias or
	// FormatMuri.
	Format string
	// Jobs are sorted by Submit, ties by Line.
	Jobs []Job
	// Start is the absolute time of Submit 0 when the format has one (Philly),
	// the zero time otherwise.
	Start time.Time
}

// The formats Parse detects.
const (
	FormatPhilly   = "philly"
	FormatTiresias = "tiresias"
	FormatMuri     = "muri"
)

// muriExtra are the columns Muri's traces add to Tiresias's.
var muriExtra = []string{"batch_size", "iteration_time", "resource_time_0", "resource_time_1", "resource_time_2", "priority"}

// format is one known trace format: its exact column set and its row parser.
type format struct {
	name    string
	columns []string
	// parser returns a parser for one file with the given column indices.
	parser func(file string, col map[string]int) rowParser
}

// rowParser turns rows into jobs; finish re-bases Submit on the earliest
// submission and returns its absolute time (zero when the format has none).
type rowParser interface {
	row(line int, rec []string) (Job, error)
	finish(jobs []Job) time.Time
}

var formats = []format{
	{
		name:    FormatPhilly,
		columns: []string{"timestamp", "duration", "num_gpus", "gpu_time", "cluster"},
		parser:  newPhilly,
	},
	{
		name:    FormatTiresias,
		columns: []string{"job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"},
		parser:  newTiresias,
	},
	{
		name: FormatMuri,
		columns: []string{"job_id", "num_gpu", "submit_time", "iterations", "model_name", "batch_size", "duration", "interval",
			"iteration_time", "resource_time_0", "resource_time_1", "resource_time_2", "priority"},
		parser: newMuri,
	},
}

// LineError is a problem with one line (and, where known, one column) of a
// trace file. Its message reads "file:line: column: what is wrong".
type LineError struct {
	File   string
	Line   int
	Column string // "" when the problem is not one column's
	Err    error
}

func (e *LineError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Column, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Load reads the trace file at path; errors name the path as given.
func Load(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load trace: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a trace in any known format from r. name is the file name used
// in errors; its base name becomes the trace's Name.
func Parse(r io.Reader, name string) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked here, to name the expected columns
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file, want a CSV header; %s", name, knownFormats())
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	header = slices.Clone(header) // ReuseRecord: the next Read overwrites it
	fmtt, col, err := detect(header)
	if err != nil {
		return nil, fmt.Errorf("%s:1: %w", name, err)
	}
	p := fmtt.parser(name, col)
	var jobs []Job
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(fmtt.columns) {
			return nil, &LineError{File: name, Line: line, Err: fmt.Errorf("%d columns, want %d (%s)", len(rec), len(fmtt.columns), strings.Join(header, ","))}
		}
		job, err := p.row(line, rec)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%s: %s trace has a header but no jobs", name, fmtt.name)
	}
	start := p.finish(jobs)
	slices.SortFunc(jobs, func(a, b Job) int {
		if c := cmp.Compare(a.Submit, b.Submit); c != 0 {
			return c
		}
		return cmp.Compare(a.Line, b.Line)
	})
	return &Trace{Name: filepath.Base(name), Format: fmtt.name, Jobs: jobs, Start: start}, nil
}

// detect finds the format whose column set is exactly the header's.
func detect(header []string) (format, map[string]int, error) {
	col := make(map[string]int, len(header))
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := col[h]; dup {
			return format{}, nil, fmt.Errorf("column %q appears twice in the header; %s", h, knownFormats())
		}
		col[h] = i
	}
	for _, f := range formats {
		if len(f.columns) != len(col) {
			continue
		}
		match := true
		for _, c := range f.columns {
			if _, ok := col[c]; !ok {
				match = false
				break
			}
		}
		if match {
			return f, col, nil
		}
	}
	return format{}, nil, fmt.Errorf("unknown trace format, header %q; %s", strings.Join(header, ","), knownFormats())
}

// knownFormats lists the formats and their headers for error messages.
func knownFormats() string {
	parts := make([]string, len(formats))
	for i, f := range formats {
		parts[i] = fmt.Sprintf("%s (%s)", f.name, strings.Join(f.columns, ","))
	}
	sort.Strings(parts)
	return "known formats, by header (any column order): " + strings.Join(parts, "; ")
}

// csvError turns encoding/csv's errors into LineErrors.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &LineError{File: name, Line: pe.Line, Err: fmt.Errorf("column %d: %w", pe.Column, pe.Err)}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// rebase shifts Submit so that the earliest submission is 0 and returns the
// earliest submission's original value. jobs must not be empty.
func rebase(jobs []Job) float64 {
	first := jobs[0].Submit
	for _, j := range jobs[1:] {
		first = min(first, j.Submit)
	}
	for i := range jobs {
		jobs[i].Submit -= first
	}
	return first
}
