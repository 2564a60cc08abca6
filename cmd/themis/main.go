// Command themis is the themis-nomad CLI: the planner daemon, the local
// development stack, and operator views.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/cli"
)

// Version is the themis-nomad version.
const Version = "0.1.0"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ui := &cli.BasicUi{Reader: os.Stdin, Writer: os.Stdout, ErrorWriter: os.Stderr}
	view := viewCommand{ui: ui, out: os.Stdout}
	c := cli.NewCLI("themis", versionString()) // --version: the line themis version prints
	c.Args = args
	// --version and -h print to stdout, as themis version does; errors
	// (an unknown command) to stderr.
	c.HelpWriter, c.ErrorWriter = os.Stdout, os.Stderr
	c.Commands = map[string]cli.CommandFactory{
		"planner":     func() (cli.Command, error) { return &plannerCommand{ui: ui}, nil },
		"dev":         func() (cli.Command, error) { return &devCommand{ui: ui}, nil },
		"status":      func() (cli.Command, error) { return &statusCommand{ui: ui}, nil },
		"check":       func() (cli.Command, error) { return &checkCommand{ui: ui}, nil },
		"sim":         func() (cli.Command, error) { return &simCommand{ui: ui}, nil },
		"vcs":         func() (cli.Command, error) { return &vcsCommand{view}, nil },
		"vcs init":    func() (cli.Command, error) { return &vcsInitCommand{ui: ui}, nil },
		"queue":       func() (cli.Command, error) { return &queueCommand{view}, nil },
		"nodes":       func() (cli.Command, error) { return &nodesCommand{view}, nil },
		"leases":      func() (cli.Command, error) { return &leasesCommand{view}, nil },
		"apps":        func() (cli.Command, error) { return &appsCommand{view}, nil },
		"job explain": func() (cli.Command, error) { return &explainCommand{view}, nil },
		"job run":     func() (cli.Command, error) { return &jobRunCommand{ui: ui, out: os.Stdout}, nil },
		"job":         func() (cli.Command, error) { return jobCommand{}, nil },
		"version":     func() (cli.Command, error) { return &versionCommand{ui: ui}, nil },
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "themis:", err)
		return 1
	}
	return code
}

type versionCommand struct{ ui cli.Ui }

func (c *versionCommand) Help() string {
	return "Usage: themis version\n\n  Prints the build: the release, the commit it was built from (+dirty\n" +
		"  for uncommitted changes) and the Go version. themis --version prints the\n" +
		"  same line, and the planner's API reports it (GET /v1/planner)."
}
func (c *versionCommand) Synopsis() string { return "Print the themis-nomad version" }
func (c *versionCommand) Run([]string) int {
	c.ui.Output(versionString())
	return 0
}

// jobCommand is the parent of themis job run and themis job explain.
type jobCommand struct{}

func (jobCommand) Synopsis() string { return "Submit a themis job and follow it, or explain one" }
func (jobCommand) Help() string {
	return "Usage: themis job <subcommand> [options] [args]\n\n" +
		"  run      submit a job (as nomad job run) and follow it until it runs\n" +
		"  explain  why a job waits or was preempted, and what would let it run"
}
func (jobCommand) Run([]string) int { return cli.RunResultHelp }
