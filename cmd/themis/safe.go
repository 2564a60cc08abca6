package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// safe makes text from the cluster (job IDs and namespaces, reasons, meta,
// app and node names: a user's job controls most of it) safe to print on a
// terminal. Control characters (C0 with tab and newline, DEL, C1),
// invisible format characters (bidirectional overrides and the like) and
// bytes that are not UTF-8 are written as Go escapes (\x1b, \n, \u202e,
// \xff), and a backslash as \\, so that the text cannot move the cursor,
// clear the screen, start a line of its own or fake an escape, and an
// operator reads what is there.
func safe(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
