package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"
	"time"

	"github.com/hashicorp/cli"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/httpapi"
)

// The operator views (themis queue, nodes, leases, apps, vcs, job
// explain) share their flags and their output, in the style of nomad's
// commands: a table by default, -json the API's document, -t a Go
// template over it. Each reads the leading planner's API and, where no
// planner serves it, Consul's records, saying so on stderr.

// viewOptions are the flags every view takes.
type viewOptions struct {
	address, consulAddr, tmpl string
	json, verbose             bool
}

// defaultAddress is -address's default: $THEMIS_ADDR, else the planner's
// default address.
func defaultAddress() string { return cmp.Or(os.Getenv("THEMIS_ADDR"), "http://"+httpapi.DefaultAddr) }

func (o *viewOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.address, "address", defaultAddress(), "the planner's HTTP API ($THEMIS_ADDR)")
	fs.StringVar(&o.consulAddr, "consul-addr", "", "Consul HTTP address, read where no planner serves the API (default $CONSUL_HTTP_ADDR or 127.0.0.1:8500)")
	fs.BoolVar(&o.json, "json", false, "print the API's JSON document")
	fs.BoolVar(&o.verbose, "verbose", false, "list every GPU id in the table (it shows them in short: ranges or a count)")
	fs.StringVar(&o.tmpl, "t", "", "format the API's document with a Go template (its fields by their JSON names: {{range .leases}}{{.job}}{{end}})")
}

const viewOptionsHelp = `
  -address URL       the planner's HTTP API (default $THEMIS_ADDR or
                     http://127.0.0.1:4680); a standby's answer is followed
                     to the leader
  -consul-addr ADDR  Consul, read where no planner serves the API (default
                     $CONSUL_HTTP_ADDR or 127.0.0.1:8500; token
                     $CONSUL_HTTP_TOKEN)
  -json              print the API's JSON document (docs/api.md)
  -verbose           list every GPU id where the table shows them in
                     short (ranges of indices, or a count)
  -t TEMPLATE        format it with a Go template; fields go by their JSON
                     names, e.g. -t '{{range .leases}}{{.job}} {{end}}'`

// viewCommand is what the views have in common.
type viewCommand struct {
	ui  cli.Ui
	out io.Writer
}

func (c *viewCommand) stdout() io.Writer {
	if c.out == nil {
		return os.Stdout
	}
	return c.out
}

// parse parses a view's flags; args left over are returned.
func (c *viewCommand) parse(name string, args []string, o *viewOptions, more func(*flag.FlagSet)) ([]string, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.flags(fs)
	if more != nil {
		more(fs)
	}
	if err := fs.Parse(args); err != nil {
		c.ui.Error("themis " + name + ": " + err.Error())
		return nil, false
	}
	if o.json && o.tmpl != "" {
		c.ui.Error("themis " + name + ": give -json or -t, not both")
		return nil, false
	}
	return fs.Args(), true
}

// get reads one API document. ok is false (with nothing printed) where no
// planner serves the API: the caller falls back to Consul after warn.
func (c *viewCommand) get(ctx context.Context, o viewOptions, path string, out any) (served bool, err error) {
	_, err = (&httpapi.Client{Addr: o.address}).Get(ctx, path, 0, 0, out)
	if errors.Is(err, httpapi.ErrNotServed) {
		return false, err
	}
	return err == nil, err
}

// fallback warns that the view reads Consul's records instead of the API,
// and what they lack, and returns the store to read.
func (c *viewCommand) fallback(name string, o viewOptions, why error, lacks string) (*consul.Store, error) {
	cfg := consulapi.DefaultConfig()
	if o.consulAddr != "" {
		cfg.Address = o.consulAddr
	}
	c.ui.Warn(safe(fmt.Sprintf("themis %s: no planner API at %s (%v); reading Consul's records at %s%s", name, o.address, why, cfg.Address, lacks)))
	cc, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return consul.NewStore(cc), nil
}

// emit prints doc: as JSON, through the template, or as table does.
func (c *viewCommand) emit(o viewOptions, doc any, table func(io.Writer)) error {
	w := c.stdout()
	switch {
	case o.json:
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case o.tmpl != "":
		return execTemplate(w, o.tmpl, doc)
	}
	table(w)
	return nil
}

// execTemplate runs a -t template over doc as its JSON reads (the API's
// field names, and fields added to the API later, without a new CLI).
func execTemplate(w io.Writer, text string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	t, err := template.New("t").Funcs(template.FuncMap{
		"json": func(x any) (string, error) {
			b, err := json.Marshal(x)
			return string(b), err
		},
		"join": func(xs []any, sep string) string {
			s := make([]string, len(xs))
			for i, x := range xs {
				s[i] = fmt.Sprint(x)
			}
			return strings.Join(s, sep)
		},
	}).Parse(text)
	if err != nil {
		return fmt.Errorf("-t: %w", err)
	}
	if err := t.Execute(w, v); err != nil {
		return fmt.Errorf("-t: %w", err)
	}
	return nil
}

// run is a view's body with a deadline and its error printed.
func (c *viewCommand) run(name string, body func(ctx context.Context) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := body(ctx); err != nil {
		c.ui.Error("themis " + name + ": " + safe(operatorHint(err).Error()))
		return 1
	}
	return 0
}

// clock formats a time for a table ("-" for none), in local time.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.TimeOnly)
}

// flagSet is flag.FlagSet, for the views' extra flags.
type flagSet = flag.FlagSet

// noArgs refuses arguments a view does not take.
func noArgs(ui cli.Ui, name string, rest []string) bool {
	if len(rest) > 0 {
		ui.Error(fmt.Sprintf("themis %s: unexpected argument %q (options go before arguments; see themis %s -h)", name, safe(rest[0]), name))
		return false
	}
	return true
}

// isNotServed: no planner serves the API at the address.
func isNotServed(err error) bool { return errors.Is(err, httpapi.ErrNotServed) }
