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
// This is bee's one rule for text shown to people and models: the
// terminal (bee's tables and views), the board page and the wake line a
// session is woken with all show board text through [Line], [Text] or
// [OneLine]. JSON output keeps the text exactly, but [JSON] writes the
// same characters as JSON escapes ("\u0085", "\u202e"): encoding/json
// leaves C1 controls, DEL and bidi controls raw, and a terminal showing
// `bee list --json` would act on them.
//
// The package is for what people and models read; it never changes what
// is stored.
package termtext

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Line returns s made safe to print as one line (a table cell, a title, an
// id): a tab becomes a space, and a line break is shown as "\n" or "\r".
func Line(s string) string { return clean(s, false) }

// Text returns s made safe to print as lines of text (a body, a result):
// newlines and tabs are kept, a "\r\n" line end becomes "\n", and every
// line is cleaned as by [Line].
func Text(s string) string { return clean(s, true) }

// OneLine returns s made safe to show as one line of running text (a
// notice, the wake line a session is woken with): every run of white
// space, line breaks and tabs among it (and U+0085, U+2028, U+2029), is
// one space, the ends are trimmed, and the rest is cleaned as by [Line].
func OneLine(s string) string {
	return Line(strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " "))
}

// JSON returns b, JSON text (as encoding/json writes it), with every
// character [Line] would escape that is still raw in it written as a JSON
// escape instead: "\u0085", "\u007f", "\u202e", and a pair of
// surrogate escapes beyond U+FFFF. A JSON parser reads back exactly the
// same values. Such characters can only stand inside strings in valid
// JSON, so b's structure is untouched; b itself is returned when nothing
// needs escaping.
func JSON(b []byte) []byte {
	if bytes.IndexFunc(b, rawInJSON) < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if rawInJSON(r) {
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}

// rawInJSON reports whether r, as encoding/json writes it, would reach a
// terminal raw though Line escapes it: DEL and the hidden characters
// (encoding/json escapes the C0 controls and U+2028, U+2029 itself).
func rawInJSON(r rune) bool {
	return r == 0x7f || hidden(r)
}

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
