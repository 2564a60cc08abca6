// Package e2e runs themis-nomad against real agents: a Consul dev agent and a
// Nomad dev agent with the themis device plugin (simulated 8-GPU node) and
// task driver, and the planner in this process. The agents come from the
// project's own build script (e2e/agents/build.sh), which builds the pinned
// versions once and caches them.
package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
	"github.com/themis-nomad/themis/planner/httpapi"
	"github.com/themis-nomad/themis/planner/policies"
)

// env is the stack shared by every test in the package.
var env struct {
	stack    *devstack.Stack
	nomad    *nomadapi.Client
	consul   *consulapi.Client
	helloBin string
	nomadBin string
	root     string
	themis   string // the themis binary (cmd/themis)
	log      hclog.Logger
	ctx      context.Context
	planner  *runningPlanner
	// work is the suite's temp folder, kept when a test fails.
	work string
	// plugins is the folder with the themis plugins the suite built.
	plugins string
	// pytorchDir holds examples/pytorch's train.py and themis_ckpt.py,
	// copied below work: the jobs run them as dynamic uids, which may not
	// reach the clone (one below a 0700 folder, as mktemp -d makes).
	pytorchDir string
	// api is the suite's planner's HTTP API (planner/httpapi), served at
	// apiURL; it leads while the suite's planner runs.
	api    *httpapi.Server
	apiURL string
	// watcher is the invariant watcher that runs for the whole run.
	watcher *suiteWatcher
	// noDocker says why the stack runs no Docker daemon ("": it runs
	// one, at env.stack.DockerHost()).
	noDocker string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	env.root = root
	// Reading a task's log (AllocFS().Cat) goes to the allocation's client
	// agent through an HTTP client the api package clones per call, with a
	// transport of its own whose idle connections linger for 90 s; a test
	// that polls logs for half a minute holds 100 connections and each
	// Nomad agent then answers 429 (http_max_conns_per_client). A negative
	// timeout makes the api package use the caller's client, and so one
	// pool of connections.
	nomadapi.ClientConnTimeout = -1
	agents, err := agentsDir(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot build or find Nomad and Consul:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "themis-e2e-")
	if err == nil {
		// The stack's tasks run as dynamic uids: they reach their alloc
		// and checkpoint dirs and the hello binary through here.
		err = os.Chmod(work, 0o711)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	keep := os.Getenv("THEMIS_E2E_KEEP") != ""
	defer func() {
		if !keep {
			os.RemoveAll(work)
		}
	}()
	plugins := filepath.Join(work, "plugins")
	env.work, env.plugins = work, plugins
	env.helloBin = filepath.Join(work, "bin", "hello")
	env.themis = filepath.Join(work, "bin", "themis")
	for out, pkg := range map[string]string{
		filepath.Join(plugins, "themis-device"): "./cmd/themis-device",
		filepath.Join(plugins, "themis-driver"): "./cmd/themis-driver",
		env.helloBin:                            "./examples/hello",
		env.themis:                              "./cmd/themis",
	} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %s: %v\n%s", pkg, err, b)
			return 1
		}
	}
	env.pytorchDir = filepath.Join(work, "pytorch")
	if err := copyReadable(filepath.Join(root, "examples", "pytorch"), env.pytorchDir, "train.py", "themis_ckpt.py"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "e2e", Level: hclog.Info, Output: os.Stderr})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := devstack.Config{
		NomadBin: filepath.Join(agents, "nomad"), ConsulBin: filepath.Join(agents, "consul"),
		PluginDir: plugins, Templates: filepath.Join(root, "examples", "agents"),
		Topology: filepath.Join(root, "examples", "topology", "dev-node.hcl"), NodeName: "dev-node",
		DataDir: filepath.Join(work, "stack"), Log: log.Named("stack"),
	}
	// Nomad's docker driver on a Docker daemon of the stack's own, where
	// dockerd is installed and we are root (docker_test.go).
	cfg.Dockerd, env.noDocker = devstack.DockerdPath()
	stack, err := devstack.Start(ctx, cfg)
	if err != nil && cfg.Dockerd != "" {
		env.noDocker = fmt.Sprintf("the Docker daemon cannot run here: %v", err)
		fmt.Fprintln(os.Stderr, "e2e:", env.noDocker, "(the docker tests will skip; the rest runs without it)")
		cfg.Dockerd = ""
		if rerr := os.RemoveAll(cfg.DataDir); rerr != nil {
			fmt.Fprintln(os.Stderr, "e2e:", rerr)
		}
		stack, err = devstack.Start(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer stack.Stop()
	env.stack = stack
	env.nomadBin = filepath.Join(agents, "nomad")
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = stack.NomadAddr()
	if env.nomad, err = nomadapi.NewClient(ncfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = stack.ConsulAddr()
	if env.consul, err = consulapi.NewClient(ccfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	env.log = log
	env.ctx = ctx
	env.api = httpapi.New(httpapi.Options{ID: "e2e"})
	apiSrv := httptest.NewServer(env.api.Handler())
	defer apiSrv.Close()
	env.apiURL = apiSrv.URL
	startPlanner(plannerSetup{policy: policies.FIFO{}})
	// The invariant watcher runs for the whole run: a violation it sees
	// fails the run (check_test.go).
	watcher := startSuiteWatcher()
	env.watcher = watcher
	code := m.Run()
	if finishSuiteWatcher(watcher) {
		code = 1
	}
	if err := stopPlanner(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: planner:", err)
		code = 1
	}
	if code != 0 || keep {
		fmt.Fprintln(os.Stderr, "e2e: agent logs and configs are in", filepath.Join(work, "stack"))
		keep = true
	}
	return code
}

// agentsDir asks the project's build script for the pinned agents (it builds
// them on a cold cache), unless THEMIS_AGENTS_DIR already names them.
func agentsDir(root string) (string, error) {
	if d := os.Getenv("THEMIS_AGENTS_DIR"); d != "" {
		return d, nil
	}
	cmd := exec.Command(filepath.Join(root, "e2e", "agents", "build.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// copyReadable copies the named files of dir src into dst (made 0755),
// each readable by every user.
func copyReadable(src, dst string, names ...string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
