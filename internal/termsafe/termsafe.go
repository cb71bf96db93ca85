// Package termsafe makes text written by agents safe to print on a
// terminal. Titles, tasks and feedback come from artifacts an agent wrote;
// printed raw, an escape sequence in them can set the clipboard (OSC 52),
// retitle the window, clear the screen or hide text. Human-readable output
// (the CLI's tables, the TUI) shows such characters escaped the way
// strconv.Quote does (\x1b, \a, \u009b), printable Unicode unchanged;
// --json output carries the text verbatim.
package termsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line escapes every character a terminal would act on, newlines and tabs
// included: for one-line fields such as a title or a table cell.
func Line(s string) string { return escape(s, false) }

// Text is Line for multi-line text (a task, feedback): newlines and tabs
// stay as they are.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepLayout bool) string {
	if safe(s, keepLayout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case printable(r, keepLayout):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\a', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// safe is the fast path: most text needs no change.
func safe(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return false // decode and judge each rune
		}
		if c < 0x20 || c == 0x7f {
			if !keepLayout || (c != '\n' && c != '\t') {
				return false
			}
		}
	}
	return true
}

func printable(r rune, keepLayout bool) bool {
	if keepLayout && (r == '\n' || r == '\t') {
		return true
	}
	// unicode.IsPrint excludes controls (C0, DEL, C1) and format characters
	// such as the bidirectional overrides that reorder what is shown.
	return r == ' ' || unicode.IsPrint(r)
}
