package consul

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"
)

// opError is a transaction Consul rolled back because of one of its
// operations (index, in the transaction as sent): the others may be
// written without it.
type opError struct {
	index int
	err   error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// maxOpBytes bounds one operation's key and value: one over it is never
// sent (Consul refuses a request over txn_max_req_len, 512 KiB by
// default, whole, with every operation in it).
const maxOpBytes = maxTxnValueBytes

// maxKeyBytes bounds a key: the planner's keys hold a namespace and a job
// ID path escaped (nomad.MaxNameBytes for a job it may lease), so a longer
// one is a name it rejected, set aside, or a forgery.
const maxKeyBytes = 2048

// RefusedWrite is one write of a batch that Consul refused, or that the
// store did not send because Consul would refuse it: Index is its place in
// the batch as the caller gave it.
type RefusedWrite struct {
	Index int
	Key   string
	Err   error
}

// RefusedError names the writes of a batch that were refused, each alone:
// every other write of the batch was committed, or, when Err is not nil
// (the error that stopped the batch), those before the transaction that
// failed.
type RefusedError struct {
	Writes []RefusedWrite
	Err    error
}

func (e *RefusedError) Error() string {
	parts := make([]string, 0, len(e.Writes))
	for _, w := range e.Writes {
		parts = append(parts, fmt.Sprintf("%s: %v", shownKey(w.Key), w.Err))
	}
	msg := fmt.Sprintf("%d writes refused, each alone (the others were written): %s", len(e.Writes), strings.Join(parts, "; "))
	if e.Err != nil {
		msg = e.Err.Error() + "; and " + msg
	}
	return msg
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Refused splits err into the writes it names as refused alone and the
// error that stopped the batch (nil when none did).
func Refused(err error) ([]RefusedWrite, error) {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Writes, re.Err
	}
	return nil, err
}

// shownKey is how an error quotes a key that may be long.
func shownKey(k string) string {
	if len(k) <= 128 {
		return k
	}
	return fmt.Sprintf("%s... (%d bytes)", k[:128], len(k))
}

// tooLarge says why op cannot be written (nil when it can): its key over
// maxKeyBytes, or key and value over maxOpBytes.
func tooLarge(op *api.TxnOp) error {
	if op.KV == nil {
		return nil
	}
	switch k, v := len(op.KV.Key), len(op.KV.Value); {
	case k > maxKeyBytes:
		return fmt.Errorf("the key is %d bytes long, over the planner's limit of %d: not written", k, maxKeyBytes)
	case k+v > maxOpBytes:
		return fmt.Errorf("key and value are %d bytes, over the planner's limit of %d for one write: not written", k+v, maxOpBytes)
	}
	return nil
}

// shortErr bounds an error's text (a rollback quotes the key).
func shortErr(err error) error {
	if msg := err.Error(); len(msg) > 512 {
		return fmt.Errorf("%s... (%d bytes)", msg[:512], len(msg))
	}
	return err
}
