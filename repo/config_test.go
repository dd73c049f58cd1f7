package repo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOriginURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, config, want string }{
		{"plain", "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.org/o/n.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", "https://example.org/o/n.git"},
		{"none", "[core]\n\tbare = false\n", ""},
		{"another remote", "[remote \"upstream\"]\n\turl = https://example.org/up/n\n", ""},
		{"first of two urls", "[remote \"origin\"]\n\turl = first\n\turl = second\n", "first"},
		{"key case", "[Remote \"origin\"]\n\tURL = https://example.org/x\n", "https://example.org/x"},
		{"subsection case kept", "[remote \"Origin\"]\n\turl = https://example.org/x\n", ""},
		{"old syntax lowercases", "[remote.Origin]\n\turl = https://example.org/old\n", "https://example.org/old"},
		{"on the header line", "[remote \"origin\"] url = https://example.org/h\n", "https://example.org/h"},
		{"quoted with comment chars", "[remote \"origin\"]\n\turl = \"https://example.org/a#b;c\" ; comment\n", "https://example.org/a#b;c"},
		{"comment after", "[remote \"origin\"]\n\turl = https://example.org/c # comment\n", "https://example.org/c"},
		{"escapes", "[remote \"origin\"]\n\turl = \"a\\\\b\\\"c\"\n", "a\\b\"c"},
		{"continuation", "[remote \"origin\"]\n\turl = https://example.org/\\\nlong\n", "https://example.org/long"},
		{"crlf", "[remote \"origin\"]\r\n\turl = https://example.org/crlf\r\n", "https://example.org/crlf"},
		{"escaped subsection", "[remote \"or\\igin\"]\n\turl = https://example.org/e\n", "https://example.org/e"},
		{"comments and blanks", "# top\n; also\n\n[remote \"origin\"]\n\n  # inside\n\turl=https://example.org/tight\n", "https://example.org/tight"},
		{"bare key before", "[remote \"origin\"]\n\tmirror\n\turl = https://example.org/m\n", "https://example.org/m"},
		{"empty url skipped", "[remote \"origin\"]\n\turl =\n\turl = https://example.org/second\n", "https://example.org/second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config")
			require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o644))
			got, err := originURL(path)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestOriginURL_Includes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("config", "[include]\n\tpath = missing.inc\n\tpath = a.inc\n[remote \"origin\"]\n\turl = https://example.org/later\n")
	write("a.inc", "[include]\n\tpath = "+filepath.Join(dir, "b.inc")+"\n")
	write("b.inc", "[remote \"origin\"]\n\turl = https://example.org/included\n")
	got, err := originURL(filepath.Join(dir, "config"))
	require.NoError(t, err)
	require.Equal(t, "https://example.org/included", got, "includes expand in place, a missing one is skipped")

	write("loop", "[include]\n\tpath = loop\n")
	_, err = originURL(filepath.Join(dir, "loop"))
	require.ErrorContains(t, err, "nested")

	got, err = originURL(filepath.Join(dir, "absent"))
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestOriginURL_Malformed(t *testing.T) {
	t.Parallel()
	for _, config := range []string{
		"url = outside\n",
		"[remote \"origin\"\n",
		"[remote origin]\n",
		"[remote \"origin]\n",
		"[remote \"origin\"]\n\turl = \"open\n",
		"[remote \"origin\"]\n\t=x\n",
		"[remote \"origin\"]\n\turl x\n",
		"[remote \"origin\"]\n\turl = bad\\q\n",
	} {
		path := filepath.Join(t.TempDir(), "config")
		require.NoError(t, os.WriteFile(path, []byte(config), 0o644))
		_, err := originURL(path)
		require.Error(t, err, "%q", config)
		require.ErrorContains(t, err, "line ")
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("[remote \"origin\"]\n\turl = \"x\\ty\" ; c\n[a.b]\nk\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		_ = parseConfig(data, func(section, sub, key, value string) error {
			require.NotEmpty(t, section)
			require.NotEmpty(t, key)
			n++
			return nil
		})
		require.LessOrEqual(t, n, len(data))
	})
}
