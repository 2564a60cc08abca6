package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/themis-nomad/themis/planner/arbiter"
	"github.com/themis-nomad/themis/planner/check"
	"github.com/themis-nomad/themis/planner/core"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/lease"
)

// hostile is text a user controls (a job ID, namespace, reason, meta, app
// name) that would drive a terminal: clear the screen, move the cursor,
// retitle the window, erase the line, reverse the text, print a fake line.
const hostile = "x\x1b[2J\x1b[H\x1b]0;owned\x07\r\x1b[K\u202egnp.\nFAKE granted\u009b31m\xff"

// Every CLI view prints what users control with its control characters
// escaped: one line per row, nothing a terminal would act on, and the
// escapes say what was there.
func TestCLIViewsEscapeControlCharacters(t *testing.T) {
	now := time.Now()
	views := map[string]func(*bytes.Buffer){
		"status": func(b *bytes.Buffer) {
			printStatuses(b, []lease.JobStatus{{Namespace: "default", JobID: hostile, State: "rejected", Node: hostile,
				GPUs: []string{hostile}, Reason: hostile, Driver: hostile, Since: now}},
				map[core.JobKey]lease.ProgressRecord{{Namespace: "default", ID: hostile}: {Iteration: 1, At: now}}, false)
		},
		"status -verbose": func(b *bytes.Buffer) {
			printStatuses(b, []lease.JobStatus{{Namespace: "default", JobID: hostile, State: "granted", Node: hostile,
				GPUs: []string{hostile, hostile + "2"}, Since: now}}, nil, true)
		},
		"status -queue": func(b *bytes.Buffer) {
			printQueue(b, httpapi.QueueResponse{VCs: []httpapi.VCQueue{{VC: hostile, Jobs: []httpapi.Queued{
				{Job: "default/" + hostile, State: hostile, Reason: hostile, Position: 1, GPUs: 1}}}}}, false)
		},
		"status -apps": func(b *bytes.Buffer) {
			printAuction(b, arbiter.RoundReport{Round: 1, At: now, Apps: []arbiter.AppReport{{App: hostile, Won: 1, Placed: hostile}}})
		},
		"check": func(b *bytes.Buffer) {
			printer(b, false)(check.Violation{Kind: check.UnleasedGPU, Job: "default/" + hostile, GPU: hostile, Node: hostile,
				Alloc: hostile, Since: now, Message: hostile})
		},
	}
	for name, view := range views {
		var b bytes.Buffer
		view(&b)
		out := b.String()
		for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			for _, r := range line {
				if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
					t.Errorf("%s: line %d holds %U: %q", name, i+1, r, line)
					break
				}
			}
			if strings.HasPrefix(line, "FAKE") {
				t.Errorf("%s: the hostile text printed a line of its own: %q", name, line)
			}
		}
		for _, esc := range []string{`\x1b[2J`, `\r`, `\u202e`, `\n`, `\u009b`, `\xff`} {
			if !strings.Contains(out, esc) {
				t.Errorf("%s: the output does not show %s:\n%s", name, esc, out)
			}
		}
	}
}
