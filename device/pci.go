package device

import (
	"fmt"
	"strconv"
	"strings"
)

// pciAddress is a PCI device's address: domain, bus, device, function.
type pciAddress struct {
	Domain, Bus, Device, Function uint64
}

// String writes the address as NVML does: "00000000:3B:00.0".
func (a pciAddress) String() string {
	return fmt.Sprintf("%08X:%02X:%02X.%X", a.Domain, a.Bus, a.Device, a.Function)
}

// parsePCIAddress reads a PCI bus ID as NVML ("00000000:3B:00.0") or sysfs
// ("0000:3b:00.0") writes it, or without its domain ("3B:00.0"), so that
// the addresses NVML gives for a GPU and for an NVLink peer compare equal
// whatever their spelling. Domain <= 0xFFFFFFFF, bus <= 0xFF, device <=
// 0x1F, function <= 7.
func parsePCIAddress(s string) (pciAddress, error) {
	var a pciAddress
	fields := strings.Split(s, ":")
	switch len(fields) {
	case 2:
		fields = append([]string{"0"}, fields...)
	case 3:
	default:
		return a, fmt.Errorf("PCI bus id %q: want [domain:]bus:device.function", s)
	}
	devfn := strings.Split(fields[2], ".")
	if len(devfn) != 2 {
		return a, fmt.Errorf("PCI bus id %q: want device.function after the bus", s)
	}
	parts := []struct {
		text string
		max  uint64
		out  *uint64
		name string
	}{
		{fields[0], 0xFFFFFFFF, &a.Domain, "domain"},
		{fields[1], 0xFF, &a.Bus, "bus"},
		{devfn[0], 0x1F, &a.Device, "device"},
		{devfn[1], 0x7, &a.Function, "function"},
	}
	for _, p := range parts {
		if p.text == "" || len(p.text) > 8 || strings.HasPrefix(p.text, "+") {
			return pciAddress{}, fmt.Errorf("PCI bus id %q: %s %q is not hexadecimal", s, p.name, p.text)
		}
		v, err := strconv.ParseUint(p.text, 16, 64)
		if err != nil {
			return pciAddress{}, fmt.Errorf("PCI bus id %q: %s %q is not hexadecimal", s, p.name, p.text)
		}
		if v > p.max {
			return pciAddress{}, fmt.Errorf("PCI bus id %q: %s %#x is above %#x", s, p.name, v, p.max)
		}
		*p.out = v
	}
	return a, nil
}

// cString reads a NUL-terminated C char array as NVML fills it.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
