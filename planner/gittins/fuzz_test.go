package gittins

import (
	"encoding/binary"
	"math"
	"testing"
)

// samplesFromBytes reads little-endian float64s, so the fuzzer reaches NaN,
// infinities, negatives, subnormals and huge values.
func samplesFromBytes(b []byte) []float64 {
	out := make([]float64, 0, len(b)/8)
	for len(b) >= 8 {
		out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(b)))
		b = b[8:]
	}
	return out
}

func bytesFromSamples(s ...float64) []byte {
	var b []byte
	for _, x := range s {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func FuzzIndex(f *testing.F) {
	f.Add(bytesFromSamples(1, 2, 3, 4), 0.0, 1.0)
	f.Add(bytesFromSamples(2, 2, 2, 10), 1.5, math.Inf(1))
	f.Add(bytesFromSamples(0, 0), 0.0, 0.0)
	f.Add(bytesFromSamples(1e299, 5e-324, 3), 5e-324, 1e-300)
	f.Add(bytesFromSamples(math.NaN(), -1), math.NaN(), -1.0)
	f.Fuzz(func(t *testing.T, raw []byte, a, delta float64) {
		samples := samplesFromBytes(raw)
		d, err := New(samples)
		if err != nil {
			return
		}
		g := d.Index(a, delta)
		b := d.BestIndex(a)
		if !(g >= 0) || !(b >= 0) {
			t.Fatalf("samples %v: Index(%v,%v) = %v, BestIndex = %v; want >= 0, not NaN", samples, a, delta, g, b)
		}
		if g > b {
			t.Fatalf("samples %v: Index(%v,%v) = %v > BestIndex %v", samples, a, delta, g, b)
		}
		if a >= d.Max() && (g != 0 || b != 0) {
			t.Fatalf("samples %v: a=%v past every sample, index %v / %v, want 0", samples, a, g, b)
		}
		o := NewOnline(nil)
		for _, s := range samples {
			if err := o.Observe(s); err != nil {
				return // the running sum check may differ from New's by rounding
			}
		}
		if og := o.Index(a, delta); og != g {
			t.Fatalf("samples %v: Online.Index = %v, New gives %v", samples, og, g)
		}
	})
}
