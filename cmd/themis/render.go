package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// A generic table of JSON objects, fields in the order the API writes
// them, for views whose documents grow fields (themis vcs): a field the
// API adds later shows as a column without a change here.

// object is a JSON object with its fields in order.
type object struct {
	keys []string
	vals []json.RawMessage
}

func (o object) get(key string) (json.RawMessage, bool) {
	if i := slices.Index(o.keys, key); i >= 0 {
		return o.vals[i], true
	}
	return nil, false
}

// decodeObjects reads a JSON array of objects, keeping field order.
func decodeObjects(raw json.RawMessage) ([]object, error) {
	var items []json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]object, 0, len(items))
	for _, it := range items {
		o, err := decodeObject(it)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func decodeObject(raw json.RawMessage) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return object{}, fmt.Errorf("want a JSON object, got %.40s", raw)
	}
	var o object
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return object{}, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return object{}, err
		}
		o.keys, o.vals = append(o.keys, t.(string)), append(o.vals, v)
	}
	return o, nil
}

// isTable: a non-empty array of objects, shown as a table of its own.
func isTable(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 2 && v[0] == '[' && bytes.HasPrefix(bytes.TrimSpace(v[1:]), []byte("{"))
}

// cell writes a field's value in a few characters: a string as it is, a
// list joined by commas, an object as key=value pairs, nothing as "-".
func cell(v json.RawMessage) string {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return safe(string(v))
	}
	return dash(safe(scalar(x)))
}

func scalar(x any) string {
	switch x := x.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return yesNo(x)
	case []any:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = scalar(e)
		}
		return strings.Join(s, ",")
	case map[string]any:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		})
		s := make([]string, len(keys))
		for i, k := range keys {
			s[i] = k + "=" + scalar(x[k])
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(x)
}

// header is a field's column title: "virtual_cells" -> "VIRTUAL CELLS".
func header(key string) string { return strings.ToUpper(strings.ReplaceAll(key, "_", " ")) }

// printObjects writes the objects as one table: a column per field that
// is not itself a table, in the order the fields first appear; skip names
// fields left out.
func printObjects(out io.Writer, objs []object, skip ...string) {
	var cols []string
	for _, o := range objs {
		for i, k := range o.keys {
			if !slices.Contains(cols, k) && !slices.Contains(skip, k) && !isTable(o.vals[i]) {
				cols = append(cols, k)
			}
		}
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for i, k := range cols {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, header(k))
	}
	fmt.Fprintln(w)
	for _, o := range objs {
		for i, k := range cols {
			if i > 0 {
				fmt.Fprint(w, "\t")
			}
			v, ok := o.get(k)
			if !ok {
				fmt.Fprint(w, "-")
				continue
			}
			fmt.Fprint(w, cell(v))
		}
		fmt.Fprintln(w)
	}
	w.Flush()
}
