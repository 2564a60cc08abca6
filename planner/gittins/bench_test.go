package gittins

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// yarnTrace is the Tiresias simulator's 10,000-sample GPU-time distribution,
// in the shared traces folder beside the repository.
var yarnTrace = filepath.Join("..", "..", "..", "shared", "traces", "yarn-gput10000.csv")

func loadTrace(b *testing.B) []float64 {
	b.Helper()
	f, err := os.Open(yarnTrace)
	if err != nil {
		b.Skipf("trace not available: %v", err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if line == 1 || text == "" {
			continue // header "duration"
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			b.Fatalf("%s line %d: %v", yarnTrace, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("read %s: %v", yarnTrace, err)
	}
	return out
}

func loadDist(b *testing.B) *Distribution {
	d, err := New(loadTrace(b))
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// attainedMix spreads attained service over the trace's range (GPU-s), from
// new jobs to ones past most samples.
var attainedMix = []float64{0, 10, 121, 500, 2227, 3250, 10000, 76381, 500000, 5e6}

func BenchmarkNew(b *testing.B) {
	samples := loadTrace(b)
	for b.Loop() {
		if _, err := New(samples); err != nil {
			b.Fatal(err)
		}
	}
}

// Index with Tiresias's static quantum (first threshold, 3,250 GPU-s).
func BenchmarkIndex(b *testing.B) {
	d := loadDist(b)
	i := 0
	for b.Loop() {
		d.Index(attainedMix[i%len(attainedMix)], 3250)
		i++
	}
}

// BestIndex at a=0 scans every distinct size: the worst case.
func BenchmarkBestIndexNewJob(b *testing.B) {
	d := loadDist(b)
	for b.Loop() {
		d.BestIndex(0)
	}
}

func BenchmarkBestIndexMix(b *testing.B) {
	d := loadDist(b)
	i := 0
	for b.Loop() {
		d.BestIndex(attainedMix[i%len(attainedMix)])
		i++
	}
}

// One finished job observed, then one query: the rebuild cost per round.
func BenchmarkOnlineObserveRebuild(b *testing.B) {
	o := NewOnline(loadDist(b))
	i := 0
	for b.Loop() {
		if err := o.Observe(float64(100 + i%5000)); err != nil {
			b.Fatal(err)
		}
		o.Index(3000, 3250)
		i++
	}
}
