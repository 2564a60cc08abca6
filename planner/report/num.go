package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Num is a statistic as it is written out: rounded to 3 decimals, and null
// in JSON (empty in CSV, "n/a" in Markdown) when it is undefined (NaN or
// infinite).
type Num float64

// undefined is the value of a statistic that cannot be computed.
func undefined() Num { return Num(math.NaN()) }

// Defined reports whether n is a finite number.
func (n Num) Defined() bool {
	f := float64(n)
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}

// String formats n with at most 3 decimals, or "" when n is undefined.
func (n Num) String() string {
	if !n.Defined() {
		return ""
	}
	return formatFloat(float64(n))
}

// MarshalJSON writes n with at most 3 decimals, or null when undefined.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Defined() {
		return []byte("null"), nil
	}
	return []byte(formatFloat(float64(n))), nil
}

// UnmarshalJSON reads a number, or null as undefined.
func (n *Num) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*n = undefined()
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// round3 rounds to 3 decimals and turns -0 into 0.
func round3(f float64) float64 {
	r := math.Round(f*1000) / 1000
	if r == 0 {
		return 0
	}
	return r
}

// formatFloat is the one float format of this package: rounded to 3
// decimals, shortest form, no exponent.
func formatFloat(f float64) string {
	return strconv.FormatFloat(round3(f), 'f', -1, 64)
}
