package consul

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Values that grow with the cluster (a stateful policy's state, the last
// auction's report: hundreds of bytes per job) are gzip'd once they pass
// packAbove, so that they stay under Consul's limit on a value and on a
// transaction's body (512 KiB each by default: kv_max_value_size,
// txn_max_req_len; a transaction carries its values in base64, a third
// more). Themis's state at 2,000 running jobs is 854 KB of JSON and 53 KB
// gzip'd. Smaller values stay JSON, readable in Consul's UI. A reader
// tells the two apart by gzip's magic bytes, which no JSON value starts
// with, so values written before this are read as they are.

// packAbove is the size past which a value is gzip'd.
const packAbove = 64 << 10

// maxUnpacked bounds what a packed value may expand to.
const maxUnpacked = 256 << 20

// pack is value as it is written: gzip'd when larger than packAbove.
func pack(value []byte) []byte {
	if len(value) <= packAbove {
		return value
	}
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level: no error
	_, _ = w.Write(value)                           // a bytes.Buffer does not fail
	_ = w.Close()
	return b.Bytes()
}

// packed reports whether a stored value is gzip'd.
func packed(value []byte) bool {
	return len(value) >= 2 && value[0] == 0x1f && value[1] == 0x8b
}

// unpack is a stored value as it was given to pack.
func unpack(value []byte) ([]byte, error) {
	if !packed(value) {
		return value, nil
	}
	r, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		return nil, fmt.Errorf("gzip'd value: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxUnpacked+1))
	if err != nil {
		return nil, fmt.Errorf("gzip'd value: %w", err)
	}
	if len(out) > maxUnpacked {
		return nil, fmt.Errorf("gzip'd value: expands past %d MiB", maxUnpacked>>20)
	}
	return out, nil
}

// putPacked writes value to key, packed; a value Consul refuses as too
// large is named with its sizes and the server settings that bound it.
func (s *Store) putPacked(ctx context.Context, key string, value []byte) error {
	v := pack(value)
	err := s.put(ctx, key, v)
	if err != nil && strings.Contains(err.Error(), "too large") {
		return errors.Join(err, fmt.Errorf("%s is %d bytes (%d as written): raise the Consul servers' kv_max_value_size and txn_max_req_len (512 KiB by default; a transaction carries the value in base64)",
			key, len(value), len(v)))
	}
	return err
}
