package trace

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// fields reads typed values out of one row, naming the file, line and column
// in errors.
type fields struct {
	file string
	line int
	col  map[string]int
	rec  []string
}

func (f fields) errorf(column, format string, args ...any) error {
	return &LineError{File: f.file, Line: f.line, Column: column, Err: fmt.Errorf(format, args...)}
}

// str returns the trimmed text of column c.
func (f fields) str(c string) string { return strings.TrimSpace(f.rec[f.col[c]]) }

// nonEmpty returns column c's text, which must not be empty.
func (f fields) nonEmpty(c string) (string, error) {
	s := f.str(c)
	if s == "" {
		return "", f.errorf(c, "empty, want a name")
	}
	return s, nil
}

// number returns column c as a finite number.
func (f fields) number(c string) (float64, error) {
	s := f.str(c)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, f.errorf(c, "%q is not a finite number", s)
	}
	return v, nil
}

// seconds returns column c as a finite, non-negative number.
func (f fields) seconds(c string) (float64, error) {
	s := f.str(c)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, f.errorf(c, "%q is out of range", s)
		}
		return 0, f.errorf(c, "%q is not a number", s)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, f.errorf(c, "%q is not a finite number", s)
	}
	if v < 0 {
		return 0, f.errorf(c, "%q must not be negative", s)
	}
	return v, nil
}

// maxCount bounds whole-number columns so that they fit an int everywhere
// and sums over a trace cannot overflow.
const maxCount = 1 << 31

// count returns column c as a whole number >= min. Whole numbers written as
// floats ("4.0", as pandas exports them) are accepted.
func (f fields) count(c string, min int) (int, error) {
	s := f.str(c)
	n, err := strconv.Atoi(s)
	if err != nil {
		v, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || v != math.Trunc(v) || math.Abs(v) >= maxCount {
			return 0, f.errorf(c, "%q is not a whole number", s)
		}
		n = int(v)
	}
	if n < min {
		if min == 1 {
			return 0, f.errorf(c, "%q must be positive", s)
		}
		return 0, f.errorf(c, "%q must be at least %d", s, min)
	}
	if n >= maxCount {
		return 0, f.errorf(c, "%q is too large (max %d)", s, maxCount-1)
	}
	return n, nil
}
