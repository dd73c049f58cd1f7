// Package termtext makes text that others wrote safe to print on a
// terminal. Titles, bodies, results and session ids on the board come from
// any agent, a prompt-injected one included; printed raw, an escape
// sequence in them could retitle the window, write the clipboard (OSC 52),
// clear the screen, or overwrite a line to fake a row, and a bidi control
// could reorder what a person reads.
//
// [Line] and [Text] promise that what they return is valid UTF-8 holding
// no C0 control (bytes below 0x20; [Text] keeps "\n" and "\t"), no DEL, no
// C1 control (U+0080-U+009F), no bidi control and no other invisible
// format character (Unicode category Cf, U+2028 and U+2029). Each such
// character is shown instead as a visible, inert escape: "\x1b" for ESC,
// "\r" for a carriage return, "\u202e" for RIGHT-TO-LEFT OVERRIDE
// ("\U000e0041" beyond U+FFFF), and a byte that is not UTF-8 as "\xff".
// Everything else, backslashes included, is left as it was.
//
// The package is for what people read; it never changes what is stored,
// and JSON output needs none of it (encoding/json escapes controls).
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s made safe to print as one line (a table cell, a title, an
// id): a tab becomes a space, and a line break is shown as "\n" or "\r".
func Line(s string) string { return clean(s, false) }

// Text returns s made safe to print as lines of text (a body, a result):
// newlines and tabs are kept, a "\r\n" line end becomes "\n", and every
// line is cleaned as by [Line].
func Text(s string) string { return clean(s, true) }

// clean does Line (multiline false) and Text (multiline true).
func clean(s string, multiline bool) string {
	if safe(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' && multiline:
			b.WriteByte('\t')
		case r == '\t':
			b.WriteByte(' ')
		case r == '\n' && multiline:
			b.WriteByte('\n')
		case r == '\r' && multiline && strings.HasPrefix(s[i+size:], "\n"):
			// A CRLF line end: the "\n" that follows ends the line.
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// safe reports whether s needs no change, so the common case allocates
// nothing.
func safe(s string, multiline bool) bool {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		case r == '\t' || r == '\n':
			if !multiline {
				return false
			}
		case r < 0x20 || r == 0x7f || hidden(r):
			return false
		}
	}
	return true
}

// hidden reports whether r, above ASCII, is a control or an invisible
// format character: a C1 control, a bidi control, a zero-width or other
// format character (category Cf, which holds every bidi control and the
// tag characters), or a line or paragraph separator.
func hidden(r rune) bool {
	if r < 0x80 {
		return false
	}
	return (r >= 0x80 && r <= 0x9f) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}
