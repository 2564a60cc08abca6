package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/themis-nomad/themis/planner"
)

// promKeywords are PromQL's words that are not metric names.
var promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"}

// metricNames lists the metric names a PromQL expression selects: the
// identifiers outside label matchers, ranges and strings that are not
// functions (followed by "("), keywords, the label lists of by/without/
// on/ignoring/group_left/group_right, or Grafana's $variables.
func metricNames(expr string) ([]string, error) {
	var names []string
	rs := []rune(expr)
	isID := func(r rune, first bool) bool {
		return r == '_' || r == ':' || unicode.IsLetter(r) && r < 128 || !first && unicode.IsDigit(r) && r < 128
	}
	skipSpace := func(i int) int {
		for i < len(rs) && unicode.IsSpace(rs[i]) {
			i++
		}
		return i
	}
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case r == '"' || r == '\'' || r == '`':
			j := i + 1
			for j < len(rs) && rs[j] != r {
				if rs[j] == '\\' && r != '`' {
					j++
				}
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i = j + 1
		case r == '{' || r == '[':
			end := map[rune]rune{'{': '}', '[': ']'}[r]
			j := i + 1
			for j < len(rs) && rs[j] != end {
				if rs[j] == '"' || rs[j] == '\'' {
					q := rs[j]
					j++
					for j < len(rs) && rs[j] != q {
						if rs[j] == '\\' {
							j++
						}
						j++
					}
				}
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("unclosed %c at %d", r, i)
			}
			i = j + 1
		case r == '$':
			j := i + 1
			if j < len(rs) && rs[j] == '{' {
				for j < len(rs) && rs[j] != '}' {
					j++
				}
				j++
			} else {
				for j < len(rs) && isID(rs[j], false) {
					j++
				}
			}
			i = j
		case isID(r, true):
			j := i
			for j < len(rs) && isID(rs[j], false) {
				j++
			}
			word := string(rs[i:j])
			k := skipSpace(j)
			switch {
			case slices.Contains(promKeywords, strings.ToLower(word)):
				if w := strings.ToLower(word); w != "and" && w != "or" && w != "unless" && w != "bool" && w != "offset" && k < len(rs) && rs[k] == '(' {
					for k < len(rs) && rs[k] != ')' {
						k++
					}
					j = k + 1
				}
			case k < len(rs) && rs[k] == '(':
				// a function
			case nextWord(rs, k) == "by" || nextWord(rs, k) == "without":
				// an aggregation: sum by (x) (...)
			default:
				names = append(names, word)
			}
			i = j
		case unicode.IsDigit(r) || r == '.':
			j := i
			for j < len(rs) && (unicode.IsDigit(rs[j]) || isID(rs[j], false) || rs[j] == '.') {
				j++ // a number or a duration (5m, 1e3)
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

// nextWord is the identifier at rs[k:] ("" for none).
func nextWord(rs []rune, k int) string {
	j := k
	for j < len(rs) && (rs[j] == '_' || unicode.IsLetter(rs[j]) && rs[j] < 128) {
		j++
	}
	return string(rs[k:j])
}

// The planner's exported metric names: every family a scrape has after
// rounds that set each of them, a histogram's series included.
func exportedMetrics(t *testing.T) []string {
	t.Helper()
	later := fixture()
	later.Time = t0.Add(time.Minute)
	later.Events = []planner.Event{{Time: later.Time, Kind: planner.EventGrant, Job: key("c")}}
	s, _ := leader(t, fixture(), later, vcFixture())
	fams, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		out = append(out, f.GetName())
		if f.GetType().String() == "HISTOGRAM" {
			out = append(out, f.GetName()+"_bucket", f.GetName()+"_sum", f.GetName()+"_count")
		}
	}
	return out
}

// Every query of the Grafana board (examples/grafana) names only metrics
// the planner exports, and every panel has one.
func TestGrafanaBoardQueriesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	for _, want := range []string{"themis_queue_length", "themis_queue_wait_seconds_bucket", "themis_jobs", "themis_round_duration_seconds_bucket"} {
		if !slices.Contains(exported, want) {
			t.Fatalf("the scrape lacks %s: %v", want, exported)
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "grafana", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no board in examples/grafana: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var board struct {
			Panels []struct {
				Title   string `json:"title"`
				Type    string `json:"type"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &board); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		queries := 0
		for _, p := range board.Panels {
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, q := range p.Targets {
				queries++
				names, err := metricNames(q.Expr)
				if err != nil || len(names) == 0 {
					t.Errorf("%s: panel %q: %q names no metric (%v)", file, p.Title, q.Expr, err)
				}
				for _, n := range names {
					if !slices.Contains(exported, n) {
						t.Errorf("%s: panel %q: %q: the planner exports no metric %s", file, p.Title, q.Expr, n)
					}
				}
			}
		}
		if queries < 10 {
			t.Errorf("%s: %d queries", file, queries)
		}
	}
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`themis_queue_length`, []string{"themis_queue_length"}},
		{`sum by (vc, le) (rate(themis_queue_wait_seconds_bucket{vc!="x",le=~"1|2"}[$__rate_interval]))`, []string{"themis_queue_wait_seconds_bucket"}},
		{`histogram_quantile(0.99, sum by (le) (rate(themis_round_duration_seconds_bucket[5m]))) * 60`, []string{"themis_round_duration_seconds_bucket"}},
		{`sum(themis_gpus{state="free"}) and on() (sum(themis_queue_length) > 0) or on() vector(0)`, []string{"themis_gpus", "themis_queue_length"}},
		{`a / ignoring(x) group_left(y) b offset 5m`, []string{"a", "b"}},
		{`max(themis_leader{job="${job}"}) > 1e3`, []string{"themis_leader"}},
		{`"not_a_metric"`, nil},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`x{a="b"`, `rate(x[5m)`, `"open`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// The tokenizer ends on any input, and what it calls a name is one.
func FuzzMetricNames(f *testing.F) {
	for _, s := range []string{`sum by (vc) (rate(a_b[5m]))`, `x{a="}"}`, `$__x ${y} 'q\'' ` + "`r`", `a and on(b) c`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := metricNames(expr)
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, " {}[]()\"'$") || unicode.IsDigit([]rune(n)[0]) {
				t.Fatalf("%q: name %q", expr, n)
			}
		}
	})
}
