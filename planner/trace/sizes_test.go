package trace

import (
	"math"
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []float64
		err       string
	}{
		{"plain", "duration\n121\n122\n", []float64{121, 122}, ""},
		{"crlf no final newline", "duration\r\n121\r\n1.5e3", []float64{121, 1500}, ""},
		{"bom spaces blanks", "\ufeff Duration \n\n 7 \n\n", []float64{7}, ""},
		{"no header", "5\n6\n", []float64{5, 6}, ""},
		{"zero", "duration\n0\n", []float64{0}, ""},
		{"empty", "", nil, "x.csv: no job-size samples"},
		{"header only", "duration\r\n", nil, "no job-size samples"},
		{"bad header", "size\n1\n", nil, `x.csv:1: header "size"`},
		{"bad sample", "duration\n1\nabc\n", nil, `x.csv:3: duration: "abc" is not a number`},
		{"negative", "duration\n1\n\n-4\n", nil, `x.csv:4: duration: "-4" must not be negative`},
		{"nan", "duration\nnan\n", nil, `x.csv:2: duration: "nan" is not a finite number`},
		{"two columns", "duration\n1,2\n", nil, `x.csv:2: duration: "1,2" is not a number`},
		{"long line", "duration\n" + strings.Repeat("1", 2<<20) + "\n", nil, "x.csv:2: bufio.Scanner: token too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSizes(strings.NewReader(tc.src), "x.csv")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// The files hold 1,001 and 9,999 samples (their names are nominal); the
// second has no final newline.
func TestLoadSizesShared(t *testing.T) {
	for name, n := range map[string]int{"yarn-gput1000.csv": 1001, "yarn-gput10000.csv": 9999} {
		t.Run(name, func(t *testing.T) {
			sizes, err := LoadSizes(sharedTrace(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(sizes) != n {
				t.Errorf("%d samples, want %d", len(sizes), n)
			}
		})
	}
}

func FuzzParseSizes(f *testing.F) {
	f.Add("duration\n121\n122\n")
	f.Add("duration\r\n1.5\r\n-3")
	f.Fuzz(func(t *testing.T, src string) {
		sizes, err := ParseSizes(strings.NewReader(src), "fuzz.csv")
		if err == nil && len(sizes) == 0 {
			t.Fatal("no samples and no error")
		}
		for _, s := range sizes {
			if !(s >= 0) || math.IsInf(s, 1) {
				t.Fatalf("bad sample %v", s)
			}
		}
	})
}
