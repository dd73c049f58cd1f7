package termtext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "fix the flaky test", "fix the flaky test"},
		{"unicode kept", "réparer le test ✓ 日本 🐝", "réparer le test ✓ 日本 🐝"},
		{"backslash kept", `C:\temp\x1b`, `C:\temp\x1b`},
		{"replacement char kept", "a\uFFFDb", "a\uFFFDb"},
		{"empty", "", ""},
		{"tab is a space", "a\tb", "a b"},
		{"newline shown", "a\nb", `a\nb`},
		{"carriage return shown", "all good\rdone", `all good\rdone`},
		{"crlf shown", "a\r\nb", `a\r\nb`},
		{"esc", "\x1b", `\x1b`},
		{"bel", "\a", `\x07`},
		{"nul", "a\x00b", `a\x00b`},
		{"del", "a\x7fb", `a\x7fb`},
		{"osc 52 clipboard write", "\x1b]52;c;ZWNobyBwd25lZA==\a", `\x1b]52;c;ZWNobyBwd25lZA==\x07`},
		{"window title", "\x1b]0;owned\x1b\\", `\x1b]0;owned\x1b\`},
		{"screen clear", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"erase line and home", "x\x1b[2K\x1b[1Gdone", `x\x1b[2K\x1b[1Gdone`},
		{"c1 csi as a rune", "a\u009b2Jb", `a\u009b2Jb`},
		{"c1 nel", "\u0085", `\u0085`},
		{"raw c1 byte, not utf-8", "a\x9b2Jb", `a\x9b2Jb`},
		{"invalid utf-8", "\xff\xfe", `\xff\xfe`},
		{"truncated utf-8", "é"[:1] + "z", `\xc3z`},
		{"rlo", "abc\u202edcba", `abc\u202edcba`},
		{"lre lle pdf lro", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`},
		{"isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"zero width space and bom", "a\u200bb\ufeff", `a\u200bb\ufeff`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"tag characters", "x\U000E0041\U000E007F", `x\U000e0041\U000e007f`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Line(tc.in))
		})
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "line one\nline two\n", "line one\nline two\n"},
		{"tabs kept", "a\tb\n\tc", "a\tb\n\tc"},
		{"crlf is a line end", "a\r\nb\r\n", "a\nb\n"},
		{"lone cr shown", "progress 10%\rdone", `progress 10%\rdone`},
		{"cr before cr lf", "a\r\r\nb", "a\\r\nb"},
		{"escapes in each line", "ok\n\x1b[2Jgone\n\u202eevil", "ok\n\\x1b[2Jgone\n\\u202eevil"},
		{"form feed and vertical tab", "a\fb\vc", `a\x0cb\x0bc`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Text(tc.in))
		})
	}
}

// A string that needs nothing comes back as it is, without a copy.
func TestLine_SafeNotCopied(t *testing.T) {
	s := strings.Repeat("safe text ", 100)
	allocs := testing.AllocsPerRun(100, func() { _ = Line(s) })
	require.Zero(t, allocs)
}

// requireSafe fails t unless out keeps every promise of the package. It
// calls require only on a failure: fuzzed inputs can be long.
func requireSafe(t *testing.T, out string, multiline bool) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "not valid UTF-8: %q", out)
	for i := 0; i < len(out); i++ {
		c := out[i]
		if (c == '\n' || c == '\t') && !multiline {
			t.Fatalf("%q at byte %d of %q", c, i, out)
		}
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			t.Fatalf("control byte %#x at %d of %q", c, i, out)
		}
	}
	for _, r := range out {
		if (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			t.Fatalf("hidden character %U in %q", r, out)
		}
	}
}

func FuzzLine(f *testing.F) {
	for _, seed := range []string{
		"", "plain", "\x1b]52;c;ZWNobw==\a", "\x1b[2J", "done\rfake", "a\r\nb",
		"\u202e\u2066\u200f\u061c", "\xff\x9b", "\u0085\u009b", "\U000E0041", "tab\there\nnext",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		line, text := Line(s), Text(s)
		requireSafe(t, line, false)
		requireSafe(t, text, true)
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
			return r < 0x20 || r == 0x7f || hidden(r)
		}) {
			require.Equal(t, s, line, "safe text changed")
			require.Equal(t, s, text, "safe text changed")
		}
		// What is safe stays as it is: cleaning twice changes nothing more.
		require.Equal(t, line, Line(line))
		require.Equal(t, text, Text(text))
	})
}

func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "Fix the flaky test", "Fix the flaky test"},
		{"lines and tabs are spaces", "one\ntwo\r\n\tthree  four", "one two three four"},
		{"ends trimmed", "  \n title \t", "title"},
		{"unicode breaks", "a\u0085b\u2028c\u2029d", "a b c d"},
		{"escape shown", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"bidi shown", "invoice\u202etxt.exe", `invoice\u202etxt.exe`},
		{"zero width shown", "pay\u200bpal", `pay\u200bpal`},
		{"c1 shown", "a\u009bb", `a\u009bb`},
		{"invalid utf-8", "a\xffb", `a\xffb`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, OneLine(tc.in))
		})
	}
}

func TestJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", `{"title":"fix it"}`, `{"title":"fix it"}`},
		{"unicode kept", `{"t":"réparer ✓ 日本 🐝"}`, `{"t":"réparer ✓ 日本 🐝"}`},
		{"c1", "{\"t\":\"a\u0085b\u009b\"}", `{"t":"a\u0085b\u009b"}`},
		{"del", "{\"t\":\"a\x7fb\"}", `{"t":"a\u007fb"}`},
		{"bidi and zero width", "{\"t\":\"\u202e\u2066\u200b\ufeff\"}", `{"t":"\u202e\u2066\u200b\ufeff"}`},
		{"tag beyond the bmp", "{\"t\":\"x\U000E0041\"}", `{"t":"x\udb40\udc41"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := JSON([]byte(tc.in))
			require.Equal(t, tc.want, string(got))
			var in, out any
			require.NoError(t, json.Unmarshal([]byte(tc.in), &in))
			require.NoError(t, json.Unmarshal(got, &out))
			require.Equal(t, in, out, "the same values")
		})
	}
}
