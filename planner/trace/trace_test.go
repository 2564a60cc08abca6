package trace

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	phillyHeader   = "timestamp,duration,num_gpus,gpu_time,cluster"
	tiresiasHeader = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"
)

func TestParsePhilly(t *testing.T) {
	src := phillyHeader + "\n" +
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
		"2017-10-09 06:13:03,2951.0,4,1.0,6214e9\n" + // gpu_time mismatch: ignored
		"\n" + // blank lines are skipped
		" 2017-10-09 06:13:03 , 0 , 2.0 ,0, vc3 \r\n" // spaces, zero duration, whole float, CRLF
	tr, err := Parse(strings.NewReader(src), "dir/philly.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "philly.csv" || tr.Format != FormatPhilly {
		t.Errorf("name/format = %q/%q", tr.Name, tr.Format)
	}
	if want := time.Date(2017, 10, 9, 6, 13, 3, 0, time.UTC); !tr.Start.Equal(want) {
		t.Errorf("start = %v, want %v", tr.Start, want)
	}
	want := []Job{
		{Line: 3, ID: "philly-3", Submit: 0, Duration: 2951, GPUs: 4, VC: "6214e9"},
		{Line: 5, ID: "philly-5", Submit: 0, Duration: 0, GPUs: 2, VC: "vc3"},
		{Line: 2, ID: "philly-2", Submit: 48*60 + 52, Duration: 66, GPUs: 1, VC: "11cb48"},
	}
	if len(tr.Jobs) != len(want) {
		t.Fatalf("jobs = %+v", tr.Jobs)
	}
	for i := range want {
		if tr.Jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, tr.Jobs[i], want[i])
		}
	}
}

func TestParseTiresias(t *testing.T) {
	// Columns in another order than the Tiresias files use.
	src := "model_name,job_id,num_gpu,submit_time,iterations,duration,interval\n" +
		"vgg19,a,1,130,606,164,30\n" +
		"vgg11,b,8,100,133,147,23\n" +
		"resnet,c,2,100,0,0,0\n"
	tr, err := Parse(strings.NewReader(src), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatTiresias || !tr.Start.IsZero() {
		t.Errorf("format %q start %v", tr.Format, tr.Start)
	}
	want := []Job{
		{Line: 3, ID: "b", Submit: 0, Duration: 147, GPUs: 8, VC: VCDefault, Model: "vgg11", Iterations: 133},
		{Line: 4, ID: "c", Submit: 0, Duration: 0, GPUs: 2, VC: VCDefault, Model: "resnet"},
		{Line: 2, ID: "a", Submit: 30, Duration: 164, GPUs: 1, VC: VCDefault, Model: "vgg19", Iterations: 606},
	}
	for i := range want {
		if i >= len(tr.Jobs) || tr.Jobs[i] != want[i] {
			t.Fatalf("jobs = %+v, want %+v", tr.Jobs, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	ph := func(rows ...string) string { return phillyHeader + "\n" + strings.Join(rows, "\n") + "\n" }
	ti := func(rows ...string) string { return tiresiasHeader + "\n" + strings.Join(rows, "\n") + "\n" }
	for _, tc := range []struct {
		name, src string
		// want are substrings of the error message.
		want []string
		line int // LineError's line, 0 when not a LineError
	}{
		{"empty", "", []string{"x.csv: empty file", "philly (timestamp,", "tiresias (job_id,"}, 0},
		{"unknown header", "a,b,c\n1,2,3\n", []string{"x.csv:1: unknown trace format", `"a,b,c"`, "philly (timestamp,duration,num_gpus,gpu_time,cluster)"}, 0},
		{"extra column", phillyHeader + ",user\n", []string{"unknown trace format"}, 0},
		{"duplicate column", "timestamp,duration,num_gpus,gpu_time,duration\n", []string{`column "duration" appears twice`}, 0},
		{"header only", phillyHeader + "\n", []string{"header but no jobs"}, 0},
		{"gpus not whole", ph("2017-10-09 07:01:55,66,x,66,vc"), []string{`x.csv:2: num_gpus: "x" is not a whole number`}, 2},
		{"gpus fraction", ph("2017-10-09 07:01:55,66,1.5,66,vc"), []string{`num_gpus: "1.5" is not a whole number`}, 2},
		{"gpus zero", ph("2017-10-09 07:01:55,66,0,66,vc"), []string{`num_gpus: "0" must be positive`}, 2},
		{"gpus negative", ph("2017-10-09 07:01:55,66,-2,66,vc"), []string{`num_gpus: "-2" must be positive`}, 2},
		{"gpus huge", ph("2017-10-09 07:01:55,66,99999999999999999999,66,vc"), []string{`num_gpus: "99999999999999999999" is not a whole number`}, 2},
		{"duration negative", ph("2017-10-09 07:01:55,66,1,66,vc", "2017-10-09 07:01:55,-1,1,66,vc"), []string{`x.csv:3: duration: "-1" must not be negative`}, 3},
		{"duration NaN", ph("2017-10-09 07:01:55,NaN,1,66,vc"), []string{`duration: "NaN" is not a finite number`}, 2},
		{"duration Inf", ph("2017-10-09 07:01:55,+Inf,1,66,vc"), []string{`duration: "+Inf" is not a finite number`}, 2},
		{"duration range", ph("2017-10-09 07:01:55,1e999,1,66,vc"), []string{`duration: "1e999" is out of range`}, 2},
		{"bad timestamp", ph("2017-13-09 07:01:55,66,1,66,vc"), []string{`timestamp: "2017-13-09 07:01:55" is not a UTC time`}, 2},
		{"empty vc", ph("2017-10-09 07:01:55,66,1,66, "), []string{"cluster: empty"}, 2},
		{"few columns", ph("2017-10-09 07:01:55,66,1,66"), []string{"x.csv:2: 4 columns, want 5 (timestamp,duration,num_gpus,gpu_time,cluster)"}, 2},
		{"many columns", ph("2017-10-09 07:01:55,66,1,66,vc,extra"), []string{"6 columns, want 5"}, 2},
		{"bad quote", ph(`2017-10-09 07:01:55,"66,1,66,vc`), []string{"x.csv:2:"}, 2},
		{"duplicate id", ti("0,1,0,606,vgg19,164,30", "1,1,0,606,vgg19,164,30", "0,1,5,606,vgg19,164,30"), []string{`x.csv:4: job_id: "0" is already used on line 2`}, 4},
		{"empty id", ti(",1,0,606,vgg19,164,30"), []string{"job_id: empty"}, 2},
		{"negative submit", ti("0,1,-5,606,vgg19,164,30"), []string{`submit_time: "-5" must not be negative`}, 2},
		{"negative iterations", ti("0,1,5,-606,vgg19,164,30"), []string{`iterations: "-606" must be at least 0`}, 2},
		{"tiresias gpus", ti("0,zero,5,606,vgg19,164,30"), []string{`num_gpu: "zero" is not a whole number`}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.src), "x.csv")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var le *LineError
			if got := errors.As(err, &le); got != (tc.line != 0) || got && le.Line != tc.line {
				t.Errorf("error %q: LineError %v (%+v), want line %d", err, got, le, tc.line)
			}
		})
	}
}

func TestParseBOMAndCase(t *testing.T) {
	src := "\ufeffTimestamp, Duration ,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66,1,66,vc\n"
	tr, err := Parse(strings.NewReader(src), "x.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatPhilly || len(tr.Jobs) != 1 {
		t.Errorf("got %+v", tr)
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load("does-not-exist.csv"); err == nil || !strings.Contains(err.Error(), "does-not-exist.csv") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadPhilly(t *testing.T) {
	path := sharedTrace(t, "philly.csv")
	start := time.Now()
	tr, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d jobs in %v", len(tr.Jobs), time.Since(start))
	if len(tr.Jobs) != 82247 {
		t.Errorf("%d jobs, want 82247", len(tr.Jobs))
	}
	if tr.Format != FormatPhilly || tr.Name != "philly.csv" {
		t.Errorf("format/name %q/%q", tr.Format, tr.Name)
	}
	// Submit times span 2017-09-04 to 2017-12-22.
	if y, m, d := tr.Start.Date(); y != 2017 || m != time.September || d != 4 {
		t.Errorf("start = %v", tr.Start)
	}
	checkInvariants(t, tr)
	vcs := map[string]bool{}
	maxGPUs := 0
	ids := map[string]bool{}
	for _, j := range tr.Jobs {
		vcs[j.VC] = true
		maxGPUs = max(maxGPUs, j.GPUs)
		ids[j.ID] = true
	}
	if len(vcs) != 15 || maxGPUs != 128 || len(ids) != len(tr.Jobs) {
		t.Errorf("%d VCs (want 15), max GPUs %d (want 128), %d unique ids", len(vcs), maxGPUs, len(ids))
	}
	last := tr.Start.Add(time.Duration(tr.Jobs[len(tr.Jobs)-1].Submit) * time.Second)
	if y, m, d := last.Date(); y != 2017 || m != time.December || d != 22 {
		t.Errorf("last submission = %v", last)
	}
}

func TestLoadTiresias(t *testing.T) {
	tr, err := Load(sharedTrace(t, "tiresias-60job.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatTiresias || len(tr.Jobs) != 60 {
		t.Fatalf("format %q, %d jobs", tr.Format, len(tr.Jobs))
	}
	checkInvariants(t, tr)
	first := tr.Jobs[0]
	if first.ID != "0" || first.GPUs != 1 || first.Model != "vgg19" || first.Iterations != 606 || first.Duration != 164 {
		t.Errorf("first job %+v", first)
	}
}

// checkInvariants checks what Parse promises of every trace it returns.
func checkInvariants(t *testing.T, tr *Trace) {
	t.Helper()
	if len(tr.Jobs) == 0 {
		t.Fatal("no jobs")
	}
	if tr.Jobs[0].Submit != 0 {
		t.Errorf("first submit %v, want 0", tr.Jobs[0].Submit)
	}
	for i, j := range tr.Jobs {
		if j.GPUs <= 0 || j.Duration < 0 || j.Submit < 0 || j.ID == "" || j.VC == "" || j.Iterations < 0 {
			t.Fatalf("job %d invalid: %+v", i, j)
		}
		if i > 0 {
			p := tr.Jobs[i-1]
			if p.Submit > j.Submit || p.Submit == j.Submit && p.Line >= j.Line {
				t.Fatalf("jobs %d and %d out of order: %+v, %+v", i-1, i, p, j)
			}
		}
	}
}

func BenchmarkLoadPhilly(b *testing.B) {
	path := sharedTrace(b, "philly.csv")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseMuri reads Muri's format (Rivendile/Muri,
// simulator/trace-data/trace1.csv's header and first rows): Tiresias's
// columns and six more, times in milliseconds.
func TestParseMuri(t *testing.T) {
	src := "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time,resource_time_0,resource_time_1,resource_time_2,priority\n" +
		"0,1,0,5853661,dqn,128,2868294000,46122000,490,446,8,0,1\n" +
		"1,8,201694000,8787693,dqn,128,4472936000,201694000,509,435,8,0.5,0\n"
	tr, err := Parse(strings.NewReader(src), "trace1.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Line: 2, ID: "0", Submit: 0, Duration: 2868294, GPUs: 1, VC: VCDefault, Model: "dqn", Iterations: 5853661},
		{Line: 3, ID: "1", Submit: 201694, Duration: 4472936, GPUs: 8, VC: VCDefault, Model: "dqn", Iterations: 8787693},
	}
	if tr.Format != FormatMuri || !slices.Equal(tr.Jobs, want) {
		t.Fatalf("format %q, jobs %+v, want muri and %+v", tr.Format, tr.Jobs, want)
	}
	for _, c := range []struct{ row, err string }{
		{"0,1,0,5,dqn,128,-1,0,490,446,8,0,1", `t.csv:2: duration: "-1" must not be negative`},
		{"0,1,0,5,dqn,128,10,0,490,x,8,0,1", `t.csv:2: resource_time_0: "x" is not a finite number`},
		{"0,1,0,5,dqn,128,10,0,490,446,8,0", `t.csv:2: 12 columns, want 13`},
	} {
		_, err := Parse(strings.NewReader(strings.SplitN(src, "\n", 2)[0]+"\n"+c.row+"\n"), "t.csv")
		if err == nil || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("row %s: error %v, want %s...", c.row, err, c.err)
		}
	}
}
