// Package textcut shortens text for a log line, an error or a table cell
// without splitting a character: a cut falls on a rune boundary and is
// marked with "…". It never changes text that fits.
package textcut

import "unicode/utf8"

// Ellipsis marks a cut.
const Ellipsis = "…"

// Bytes returns s when it is at most n bytes long, else its longest prefix
// of at most n bytes that ends on a rune boundary, followed by Ellipsis
// (so at most n+3 bytes in all).
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Ellipsis
}

// Within returns s when it is at most n bytes long, else a prefix ending
// on a rune boundary followed by Ellipsis, at most n bytes in all.
func Within(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Bytes(s, n-len(Ellipsis))
}

// Runes returns s when it holds at most n runes, else its first n runes
// followed by Ellipsis.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:max(n, 0)]) + Ellipsis
}

// RunesWithin returns s when it holds at most n runes, else its first n-1
// runes followed by Ellipsis: n runes in all, as a table cell of width n
// wants.
func RunesWithin(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return Runes(s, n-1)
}
