package topology

import (
	"reflect"
	"strings"
	"testing"
)

func TestEncodeLayout(t *testing.T) {
	gpus := []GPU{
		{Index: 1, ID: "SIM-dev-node-1", Path: "socket0/switch0/pair0"},
		{Index: 0, ID: "SIM-dev-node-0", Path: "socket0/switch0/pair0"},
		{Index: 10, ID: "GPU-x", Path: ""},
	}
	got := EncodeLayout(gpus)
	want := "0:SIM-dev-node-0:socket0/switch0/pair0;1:SIM-dev-node-1:socket0/switch0/pair0;10:GPU-x:"
	if got != want {
		t.Fatalf("EncodeLayout = %q, want %q", got, want)
	}
	if gpus[0].Index != 1 {
		t.Error("EncodeLayout reordered its input")
	}
	if EncodeLayout(nil) != "" {
		t.Error("EncodeLayout(nil) not empty")
	}
}

func TestDecodeLayout(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []LayoutEntry
		wantErr string
	}{
		{name: "empty", in: "", want: nil},
		{name: "one", in: "0:GPU-a:s0/p0", want: []LayoutEntry{{0, "GPU-a", "s0/p0"}}},
		{name: "sorted on decode", in: "3:b:x;1:a:", want: []LayoutEntry{{1, "a", ""}, {3, "b", "x"}}},
		{name: "too few fields", in: "0:GPU-a", wantErr: "want index:id:path, got 2 field(s)"},
		{name: "too many fields", in: "0:a:b:c", wantErr: "got 4 field(s)"},
		{name: "trailing separator", in: "0:a:p;", wantErr: `layout entry 1 ""`},
		{name: "negative index", in: "-1:a:p", wantErr: "not a non-negative decimal integer"},
		{name: "plus sign", in: "+1:a:p", wantErr: "not a non-negative decimal integer"},
		{name: "leading zero", in: "01:a:p", wantErr: "leading zero"},
		{name: "empty index", in: ":a:p", wantErr: "index is empty"},
		{name: "huge index", in: "99999999999999999999999:a:p", wantErr: "out of range"},
		{name: "empty id", in: "0::p", wantErr: "id is empty"},
		{name: "space in id", in: "0:a b:p", wantErr: `id "a b" contains ' '`},
		{name: "comma in id", in: "0:a,b:p", wantErr: `contains ','`},
		{name: "empty cell", in: "0:a:s0//p", wantErr: "cell 1 is empty"},
		{name: "equals in path", in: "0:a:s=0", wantErr: "contains '='"},
		{name: "duplicate index", in: "0:a:p;0:b:p", wantErr: "duplicate index 0"},
		{name: "duplicate id", in: "0:a:p;1:a:p", wantErr: `duplicate id "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeLayout(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DecodeLayout(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DecodeLayout(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestLayoutEntryCells(t *testing.T) {
	e := LayoutEntry{Path: "socket1/switch0/pair0"}
	if got := e.Cells(); !reflect.DeepEqual(got, []string{"socket1", "switch0", "pair0"}) {
		t.Errorf("Cells = %v", got)
	}
}

// FuzzLayoutRoundTrip checks that DecodeLayout never panics, that whatever it
// accepts re-encodes to the same string once sorted, and that encoding valid
// GPUs decodes back to them.
func FuzzLayoutRoundTrip(f *testing.F) {
	f.Add("0:SIM-dev-node-0:socket0/switch0/pair0;1:SIM-dev-node-1:socket0/switch0/pair0", 3, "GPU-x", "a/b")
	f.Add("", 0, "", "")
	f.Add("1:a:;0:b:x", -1, "a b", "a//b")
	f.Fuzz(func(t *testing.T, s string, index int, id, path string) {
		if entries, err := DecodeLayout(s); err == nil {
			gpus := make([]GPU, len(entries))
			for i, e := range entries {
				gpus[i] = GPU{Index: e.Index, ID: e.ID, Path: e.Path}
			}
			again, err := DecodeLayout(EncodeLayout(gpus))
			if err != nil || !reflect.DeepEqual(again, entries) {
				t.Fatalf("decode(encode(decode(%q))) = %v, %v; want %v", s, again, err, entries)
			}
		}

		// Build valid GPUs from the fuzzed fields and check the round trip.
		if index < 0 || ValidateID(id) != nil || ValidatePath(path) != nil {
			return
		}
		gpus := []GPU{
			{Index: index, ID: id, Path: path},
			{Index: index + 1, ID: id + "-b", Path: path},
		}
		if index+1 < 0 { // overflow
			gpus = gpus[:1]
		}
		want := make([]LayoutEntry, len(gpus))
		for i, g := range gpus {
			want[i] = LayoutEntry{Index: g.Index, ID: g.ID, Path: g.Path}
		}
		got, err := DecodeLayout(EncodeLayout(gpus))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("decode(encode(%v)) = %v, %v", gpus, got, err)
		}
	})
}
