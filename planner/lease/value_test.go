package lease

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fill sets every field of a struct (recursively) to a value that is not
// its zero value, so that a field added later is covered by the round trip.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + strings.Repeat("x", *n))
	case reflect.Int, reflect.Int64:
		if v.Type() == reflect.TypeOf(time.Duration(0)) {
			v.SetInt(int64(*n) * int64(time.Second))
			return
		}
		v.SetInt(int64(*n))
	case reflect.Uint64, reflect.Uint:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 24, 10, 0, *n, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

// A lease's value in Consul is indented JSON that opens with what an
// operator looks for (state, job, VC, GPUs, node, granted, ends, revoke)
// and reads back as the same lease, every field of it (fields added later
// included: the lease is filled by reflection).
func TestLeaseValueIsReadableAndRoundTrips(t *testing.T) {
	var j JobLease
	n := 0
	fill(reflect.ValueOf(&j).Elem(), &n)
	b, err := j.Value()
	if err != nil {
		t.Fatal(err)
	}
	var back JobLease
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, j) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v\nvalue:\n%s", back, j, b)
	}
	lines := strings.Split(string(b), "\n")
	want := []string{`{`, `  "state": "revoking",`, `  "job": "` + j.Namespace + "/" + j.JobID + `",`, `  "vc": "` + j.VC + `",`, `  "gpus": [`}
	for i, w := range want {
		if lines[i] != w {
			t.Fatalf("line %d: %q, want %q\n%s", i, lines[i], w, b)
		}
	}
	order := []string{`"node_name"`, `"granted_at"`, `"ends"`, `"revoke"`, `"deadline"`, `"lease_id"`, `"submit_index"`}
	at := 0
	for _, k := range order {
		i := strings.Index(string(b), k)
		if i < at {
			t.Errorf("%s comes before a field it should follow:\n%s", k, b)
		}
		at = i
	}

	granted := JobLease{LeaseID: "L", Namespace: "default", JobID: "a", GPUs: []string{"g0"}}
	if b, _ := granted.Value(); !strings.HasPrefix(string(b), "{\n  \"state\": \"granted\",\n  \"job\": \"default/a\",") {
		t.Errorf("a granted lease:\n%s", b)
	}

	var g GPULease
	fill(reflect.ValueOf(&g).Elem(), &n)
	b, err = g.Value()
	if err != nil {
		t.Fatal(err)
	}
	var gb GPULease
	if err := json.Unmarshal(b, &gb); err != nil || !reflect.DeepEqual(gb, g) {
		t.Fatalf("GPU lease round trip: %v\n%+v\nwant\n%+v", err, gb, g)
	}
	if !strings.HasPrefix(string(b), "{\n  \"job\": ") {
		t.Errorf("GPU lease value:\n%s", b)
	}
}
