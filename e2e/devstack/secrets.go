package devstack

import (
	"fmt"
	"os"
	"syscall"
)

// The stack's files that hold secrets. With ACLs on, the rendered agent
// configs hold the management token (consul.hcl, nomad.hcl, and in a
// cluster nomad-server.hcl and each nomad-client-<node>.hcl) and the
// driver's Consul token; the agents' logs may name what they were given.
// The data dir is 0711 so that the tasks' dynamic uids reach their alloc
// dirs below it, and a task knows these files' names: each is 0600,
// root's (the user's who runs the stack), whatever the umask and whatever
// mode an earlier run left (docs/hardening.md, "Files that hold secrets").

// secretMode is the mode of every file of the stack that may hold a
// secret.
const secretMode = 0o600

// writeSecret writes data to path, mode 0600: a file left by an earlier
// run (with another mode) is truncated and chmodded before it is written.
func writeSecret(path string, data []byte) error {
	f, err := openPrivate(path, os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("devstack: write %s: %w", path, err)
	}
	return f.Close()
}

// openPrivate opens path for writing (created, with the extra flag
// os.O_TRUNC or os.O_APPEND), mode 0600, never through a symlink.
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|flag, secretMode)
	if err != nil {
		return nil, fmt.Errorf("devstack: %w", err)
	}
	if err := f.Chmod(secretMode); err != nil {
		f.Close()
		return nil, fmt.Errorf("devstack: %w", err)
	}
	return f, nil
}
