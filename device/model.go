package device

import (
	"strings"
	"unicode"
)

// modelName makes an NVML device name a device group name: '/' (not allowed
// there) becomes '-', control characters are dropped, spaces trimmed.
func modelName(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r == '/':
			return '-'
		case isControlRune(r):
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" {
		return "unknown"
	}
	return name
}

func isControlRune(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }
