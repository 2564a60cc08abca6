package workload

import "testing"

// BenchmarkFitGpp generates the paper's 2^19 jobs.
func BenchmarkFitGpp(b *testing.B) {
	for _, arrivals := range []string{ArrivalsFIFO, ArrivalsPoisson} {
		b.Run(arrivals, func(b *testing.B) {
			cfg := DefaultFitGppConfig()
			cfg.Arrivals = arrivals
			for b.Loop() {
				if _, err := FitGpp(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDescribe summarises 2^19 jobs, FIFO replay included.
func BenchmarkDescribe(b *testing.B) {
	cfg := DefaultFitGppConfig()
	tr, err := FitGpp(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Describe(tr, cfg.Cluster); err != nil {
			b.Fatal(err)
		}
	}
}
