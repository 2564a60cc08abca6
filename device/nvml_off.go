//go:build !linux || !cgo

package device

import "github.com/hashicorp/go-hclog"

// openNVMLBackend: this binary was built without cgo (or not for Linux), so
// it cannot load libnvidia-ml; the nvml backend reports no GPUs.
func openNVMLBackend(cfg Config, logger hclog.Logger) (Backend, error) {
	return newAbsentBackend(cfg, logger, "themis-device was built without cgo; rebuild it with CGO_ENABLED=1 on Linux"), nil
}
