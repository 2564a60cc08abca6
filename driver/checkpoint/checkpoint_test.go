package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// layout builds a checkpoint dir: each entry is a subdirectory, complete
// (marker written) or not, with its marker's (or, incomplete, its own)
// modification time at base plus offset seconds.
type layoutEntry struct {
	name     string
	complete bool
	at       int // seconds after base
}

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func layout(t *testing.T, ents ...layoutEntry) string {
	t.Helper()
	dir := t.TempDir()
	for _, e := range ents {
		p := filepath.Join(dir, e.name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "state"), []byte(e.name), 0o600); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(e.at) * time.Second)
		if e.complete {
			m := filepath.Join(p, Marker)
			if err := os.WriteFile(m, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(m, at, at); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func names(cs []Checkpoint) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestLatest(t *testing.T) {
	cases := []struct {
		name string
		ents []layoutEntry
		want string // "" = none
	}{
		{"empty", nil, ""},
		{"only incomplete", []layoutEntry{{"a", false, 1}}, ""},
		{"newest complete", []layoutEntry{{"a", true, 1}, {"b", true, 3}, {"c", true, 2}}, "b"},
		{"incomplete newer is skipped", []layoutEntry{{"step-1", true, 1}, {"step-2", false, 9}}, "step-1"},
		{"by marker time, not by name", []layoutEntry{{"z", true, 1}, {"a", true, 2}}, "a"},
		{"ties broken by name", []layoutEntry{{"step-09", true, 5}, {"step-10", true, 5}}, "step-10"},
		{"temporaries are never complete", []layoutEntry{{"a", true, 1}, {".tmp-b-1", true, 5}}, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := layout(t, c.ents...)
			got, ok, err := Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (c.want != "") || got.Name != c.want {
				t.Fatalf("Latest = %+v, %v; want %q", got, ok, c.want)
			}
			if ok && got.Path != filepath.Join(dir, c.want) {
				t.Fatalf("path %s, want %s", got.Path, filepath.Join(dir, c.want))
			}
		})
	}
}

func TestLatest_MarkerMustBeAFile(t *testing.T) {
	dir := layout(t, layoutEntry{"old", true, 1})
	if err := os.MkdirAll(filepath.Join(dir, "dir-marker", Marker), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "link-marker"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "old", Marker), filepath.Join(dir, "link-marker", Marker)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "old"), filepath.Join(dir, "link-dir")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Latest(dir)
	if err != nil || !ok || got.Name != "old" {
		t.Fatalf("Latest = %+v, %v, %v; want old", got, ok, err)
	}
}

func TestLatest_NoDir(t *testing.T) {
	_, ok, err := Latest(filepath.Join(t.TempDir(), "nope"))
	if err != nil || ok {
		t.Fatalf("Latest of a missing dir = %v, %v; want none and no error", ok, err)
	}
}

func TestPrune(t *testing.T) {
	cases := []struct {
		name string
		ents []layoutEntry
		keep int
		left []string // what remains, sorted
	}{
		{"keeps the newest three", []layoutEntry{{"a", true, 1}, {"b", true, 2}, {"c", true, 3}, {"d", true, 4}, {"e", true, 5}}, 3,
			[]string{"c", "d", "e"}},
		{"fewer than keep", []layoutEntry{{"a", true, 1}}, 3, []string{"a"}},
		{"old incomplete leftovers go, newer stay", []layoutEntry{{"a", true, 5}, {".tmp-b-1", false, 3}, {"cut", false, 1}, {"late", false, 9}}, 3,
			[]string{"a", "late"}},
		{"no complete checkpoint: incomplete ones stay", []layoutEntry{{"x", false, 1}, {"y", false, 2}}, 1, []string{"x", "y"}},
		{"keep one", []layoutEntry{{"a", true, 1}, {"b", true, 2}, {"c", false, 1}}, 1, []string{"b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := layout(t, c.ents...)
			if err := os.WriteFile(filepath.Join(dir, "notice.json"), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
			removed, err := Prune(dir, c.keep)
			if err != nil {
				t.Fatal(err)
			}
			des, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, d := range des {
				if d.IsDir() {
					left = append(left, d.Name())
				}
			}
			slices.Sort(left)
			if !slices.Equal(left, c.left) {
				t.Fatalf("left %v, want %v (removed %v)", left, c.left, removed)
			}
			if len(removed)+len(left) != len(c.ents) {
				t.Fatalf("removed %v and left %v of %d", removed, left, len(c.ents))
			}
			if _, err := os.Stat(filepath.Join(dir, "notice.json")); err != nil {
				t.Fatalf("prune removed a file that is no checkpoint: %v", err)
			}
		})
	}
	if _, err := Prune(t.TempDir(), 0); err == nil {
		t.Fatal("keep 0 must be refused")
	}
}

func TestSave(t *testing.T) {
	dir := t.TempDir()
	c1, err := Save(dir, "step-1", func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "state"), []byte("1"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(c1.Path, "state")); err != nil || string(b) != "1" {
		t.Fatalf("state %q, %v", b, err)
	}
	c2, err := Save(dir, "step-2", func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := List(dir); !slices.Equal(names(got), []string{"step-2", "step-1"}) {
		t.Fatalf("List = %v, want step-2, step-1", names(got))
	}
	if c2.Time.Before(c1.Time) {
		t.Fatalf("second checkpoint's time %v is before the first's %v", c2.Time, c1.Time)
	}

	// A failing fill leaves nothing behind; a taken name is refused.
	boom := errors.New("disk full")
	if _, err := Save(dir, "step-3", func(string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Save with failing fill: %v", err)
	}
	if _, err := Save(dir, "step-2", func(string) error { return nil }); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Save over an existing checkpoint: %v", err)
	}
	for _, bad := range []string{"", ".hidden", "a/b"} {
		if _, err := Save(dir, bad, func(string) error { return nil }); err == nil {
			t.Fatalf("Save accepted name %q", bad)
		}
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 2 {
		t.Fatalf("dir holds %v, want only the two checkpoints", des)
	}
}
