//go:build linux && cgo

package device

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"
)

// nvmlBackend reports a node's GPUs through NVML (see docs/nvml.md for
// what it reads and how links become cells). The library is an
// nvml.Interface: nvml.New() on a node, a fake in tests. It is opened when
// the backend is built, never by the sim backend; where it cannot be
// (no driver, no libnvidia-ml.so.1), the backend says so once and reports
// no GPUs, trying again at each fingerprint.
type nvmlBackend struct {
	lib        nvml.Interface
	logger     hclog.Logger
	node, rack string
	health     *gpuHealth
	files      deviceFiles
	now        func() time.Time

	mu     sync.Mutex
	ready  bool   // lib.Init succeeded
	absent string // why NVML is not available, once said
	stop   context.CancelFunc
	// watched says, by UUID, which health events of a GPU are watched
	// ("" for none); a GPU not in it has not been registered yet.
	watched map[string]string
	events  nvml.EventSet
	// devices are the GPUs of the last fingerprint, for Stats.
	devices []statDevice
	// known is, by NVML index, what the last good probe of a GPU read, so
	// that a GPU whose calls start failing keeps its ID, model and memory.
	known map[int]gpuIdentity
	// migGI is, by GPU UUID and GPU instance ID, the UUIDs of the MIG
	// instances of the last fingerprint, so that an event inside one GPU
	// instance marks only its MIG devices.
	migGI map[string]map[int][]string
	// changed is signalled when an event changes a GPU's health.
	changed chan struct{}
}

// gpuIdentity is what identifies a GPU across fingerprints.
type gpuIdentity struct {
	uuid, model string
	memoryMiB   int64
}

// statDevice is one schedulable GPU or MIG instance of the last fingerprint.
type statDevice struct {
	id, model string
	dev       nvml.Device
	mig       bool
}

// openNVMLBackend loads libnvidia-ml.so.1 and builds the nvml backend.
func openNVMLBackend(cfg Config, logger hclog.Logger) (Backend, error) {
	return newNVMLBackend(cfg, nvml.New(), logger, deviceFiles{}, time.Now)
}

// newNVMLBackend builds the nvml backend on lib and initialises NVML; a
// failure to do so is logged, not returned (the node then has no GPUs).
func newNVMLBackend(cfg Config, lib nvml.Interface, logger hclog.Logger, files deviceFiles, now func() time.Time) (*nvmlBackend, error) {
	recovery, err := cfg.xidRecovery()
	if err != nil {
		return nil, err
	}
	node, rack := nvmlNodeName(cfg)
	b := &nvmlBackend{
		lib:     lib,
		logger:  logger.Named(BackendNVML),
		node:    node,
		rack:    rack,
		health:  newGPUHealth(recovery),
		files:   files,
		now:     now,
		watched: map[string]string{},
		known:   map[int]gpuIdentity{},
		changed: make(chan struct{}, 1),
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	return b, nil
}

func (b *nvmlBackend) Name() string { return BackendNVML }

// Changed is signalled when an NVML event changed a GPU's health.
func (b *nvmlBackend) Changed() <-chan struct{} { return b.changed }

// notify signals Changed without blocking: one pending signal is enough.
func (b *nvmlBackend) notify() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// initLocked initialises NVML if it is not yet; it reports whether NVML is
// ready. The first failure is logged in one line, and the first success
// after one.
func (b *nvmlBackend) initLocked() bool {
	if b.ready {
		return true
	}
	ret := b.lib.Init()
	if ret != nvml.SUCCESS {
		why := nvmlAbsence(ret)
		if why != b.absent {
			b.logger.Warn("NVML is not available: reporting no GPUs", "reason", why)
			b.absent = why
		}
		return false
	}
	if b.absent != "" {
		b.logger.Info("NVML is available now")
	}
	b.ready, b.absent = true, ""
	if driver, ret := b.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		b.logger.Info("NVML initialised", "driver", driver)
	}
	return true
}

// nvmlAbsence says why NVML failed to initialise, in an operator's words.
func nvmlAbsence(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 cannot be loaded (no NVIDIA driver installed on this node?)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA kernel driver is not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to open the NVIDIA devices"
	default:
		return fmt.Sprintf("nvmlInit: %s", nvmlError(ret))
	}
}

// nvmlError is an NVML return code as text, whether or not the library is
// loaded.
func nvmlError(ret nvml.Return) string {
	return fmt.Sprintf("%v (code %d)", error(ret), int32(ret))
}

// errNVML wraps an NVML return code as an error naming the call.
func errNVML(call string, ret nvml.Return) error {
	return fmt.Errorf("NVML %s: %w", call, errors.New(nvmlError(ret)))
}

// Close stops the event watcher and shuts NVML down.
func (b *nvmlBackend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
	if b.ready {
		b.ready = false
		if b.events == nil {
			b.lib.Shutdown()
		}
		// else the watcher frees the event set and shuts NVML down.
	}
}
