package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// LoadSizes reads a job-size distribution file (yarn-gput*.csv: header
// "duration", then one job GPU-time sample in seconds a line). See
// ParseSizes.
func LoadSizes(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load job sizes: %w", err)
	}
	defer f.Close()
	return ParseSizes(f, path)
}

// ParseSizes reads job-size samples from r, in file order; name is used in
// errors. The header "duration" may be missing (the first line is then a
// sample). Blank lines, surrounding spaces, CRLF line ends, a byte-order mark
// and a missing final newline are accepted. Samples must be finite and not
// negative; a file without samples is an error.
func ParseSizes(r io.Reader, name string) ([]float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var sizes []float64
	col := map[string]int{"duration": 0}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			text = strings.TrimSpace(strings.TrimPrefix(text, "\ufeff"))
			if strings.EqualFold(text, "duration") {
				continue
			}
		}
		if text == "" {
			continue
		}
		f := fields{file: name, line: line, col: col, rec: []string{text}}
		v, err := f.seconds("duration")
		if err != nil {
			if line == 1 {
				return nil, &LineError{File: name, Line: 1, Err: fmt.Errorf("header %q: want \"duration\" (or a first sample)", text)}
			}
			return nil, err
		}
		sizes = append(sizes, v)
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{File: name, Line: line + 1, Err: err}
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("%s: no job-size samples", name)
	}
	return sizes, nil
}
