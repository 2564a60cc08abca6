package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// A Docker daemon of the stack's own (Config.Dockerd), so that the dev
// agent's docker driver runs themis jobs with the stanza in meta
// (docs/drivers.md): Debian's docker.io (dockerd 20.10, containerd, runc)
// as root on this machine's cgroups v1. It keeps its images and containers
// in <data dir>/docker and listens on a socket of its own, so it neither
// needs nor touches a system Docker. It makes no bridge, iptables rules or
// NAT (--bridge=none --iptables=false --ip-masq=false): containers run
// with network_mode "none" or "host", and nothing reaches beyond this
// machine. Images are built locally (examples/docker/build.sh); the dev
// agent's docker plugin never pulls a tagged image it has and never
// garbage-collects one (it could not pull it back).

// DockerdPath returns the dockerd to start for a stack: the one on PATH,
// or "" and why there is none (not installed, or not root: dockerd needs
// root here).
func DockerdPath() (string, string) {
	p, err := exec.LookPath("dockerd")
	if err != nil {
		// Debian puts it in /usr/sbin, which a user's PATH may lack.
		if _, serr := os.Stat("/usr/sbin/dockerd"); serr != nil {
			return "", "no dockerd on PATH or in /usr/sbin (apt-get install docker.io, or make docker)"
		}
		p = "/usr/sbin/dockerd"
	}
	if os.Geteuid() != 0 {
		return "", "dockerd needs root"
	}
	return p, ""
}

// DockerHost is the DOCKER_HOST of the stack's Docker daemon ("" without
// one), for the docker CLI (e.g. examples/docker/build.sh).
func (s *Stack) DockerHost() string {
	if s.dockerSock == "" {
		return ""
	}
	return "unix://" + s.dockerSock
}

// startDocker starts the stack's dockerd and waits until it answers.
func (s *Stack) startDocker(ctx context.Context) error {
	// A unix socket path has at most 107 bytes and containerd's own sit
	// deeper in the exec root: keep that short, in /tmp.
	run, err := os.MkdirTemp("", "themis-dockerd-")
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func() { _ = os.RemoveAll(run) })
	s.dockerSock = filepath.Join(run, "docker.sock")
	data := filepath.Join(s.cfg.DataDir, "docker")
	if err := os.MkdirAll(data, 0o711); err != nil {
		return err
	}
	if err := s.spawn("dockerd", s.cfg.Dockerd,
		"--data-root", data, "--exec-root", filepath.Join(run, "exec"), "--pidfile", filepath.Join(run, "dockerd.pid"),
		"--host", "unix://"+s.dockerSock, "--bridge=none", "--iptables=false", "--ip-masq=false"); err != nil {
		return err
	}
	return s.waitFor(ctx, "the Docker daemon", 60*time.Second, s.dockerReady)
}

// dockerReady asks the daemon's /_ping over its socket.
func (s *Stack) dockerReady(ctx context.Context) (bool, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.dockerSock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("dockerd /_ping: %s: %s", resp.Status, b)
	}
	return true, nil
}
