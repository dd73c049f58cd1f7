package repo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxIncludeDepth is git's own bound on nested `[include]`s.
const maxIncludeDepth = 10

// originURL returns the first `url` of `[remote "origin"]` in the git
// config file at path (following `[include] path`, not `[includeIf]`), ""
// when there is none or no such file. The first is the one git fetches
// from, as `git remote get-url origin` says.
func originURL(path string) (string, error) {
	var url string
	err := readConfig(path, 0, func(section, sub, key, value string) bool {
		if section == "remote" && sub == "origin" && key == "url" && value != "" {
			url = value
			return false
		}
		return true
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return url, err
}

// errStop ends a walk early, found what it wanted.
var errStop = errors.New("stop")

// readConfig calls fn for every variable of the config file at path, in
// order, with includes expanded in place, until fn returns false (then it
// returns errStop). A missing file (the config, or an included one, as git
// does) is not an error.
func readConfig(path string, depth int, fn func(section, sub, key, value string) bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read git config: %w", err)
	}
	err = parseConfig(data, func(section, sub, key, value string) error {
		if section == "include" && sub == "" && key == "path" && value != "" {
			if depth >= maxIncludeDepth {
				return fmt.Errorf("git config %s: includes nested more than %d deep", path, maxIncludeDepth)
			}
			return readConfig(includePath(value, filepath.Dir(path)), depth+1, fn)
		}
		if !fn(section, sub, key, value) {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("git config %s: %w", path, err)
	}
	return err
}

func includePath(p, dir string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// parseConfig calls fn for every variable of a git config file, with the
// section and key lowercased and the subsection as written (git's rules:
// `[section "sub"]` keeps the subsection's case, the old `[section.sub]`
// lowercases it; values lose surrounding blanks, quotes and comments and
// have their escapes applied). A bare key (`key` alone) has the value
// "true". It stops at the first error fn returns.
func parseConfig(data []byte, fn func(section, sub, key, value string) error) error {
	p := configParser{data: data, line: 1}
	var section, sub string
	for {
		p.skipSpace(true)
		c, ok := p.peek()
		switch {
		case !ok:
			return nil
		case c == '#' || c == ';':
			p.skipLine()
		case c == '[':
			var err error
			if section, sub, err = p.header(); err != nil {
				return err
			}
		case isAlpha(c):
			if section == "" {
				return p.errorf("variable outside any section")
			}
			key, value, err := p.variable()
			if err != nil {
				return err
			}
			if err := fn(section, sub, key, value); err != nil {
				return err
			}
		default:
			return p.errorf("unexpected %q", c)
		}
	}
}

type configParser struct {
	data []byte
	pos  int
	line int
}

func (p *configParser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, args...))
}

func (p *configParser) peek() (byte, bool) {
	if p.pos >= len(p.data) {
		return 0, false
	}
	return p.data[p.pos], true
}

func (p *configParser) next() (byte, bool) {
	c, ok := p.peek()
	if ok {
		p.pos++
		if c == '\n' {
			p.line++
		}
	}
	return c, ok
}

// skipSpace skips blanks, and line ends too when lines is set.
func (p *configParser) skipSpace(lines bool) {
	for {
		c, ok := p.peek()
		if !ok || !(c == ' ' || c == '\t' || c == '\r' || lines && c == '\n') {
			return
		}
		p.next()
	}
}

func (p *configParser) skipLine() {
	for {
		c, ok := p.next()
		if !ok || c == '\n' {
			return
		}
	}
}

// header reads `[section]`, `[section "sub"]` or `[section.sub]`.
func (p *configParser) header() (section, sub string, err error) {
	p.next() // '['
	start := p.pos
	for {
		c, ok := p.peek()
		if !ok || c == '\n' {
			return "", "", p.errorf("section header without ']'")
		}
		if c == ']' || c == ' ' || c == '\t' {
			break
		}
		if !isAlnum(c) && c != '-' && c != '.' {
			return "", "", p.errorf("bad character %q in section name", c)
		}
		p.next()
	}
	name := strings.ToLower(string(p.data[start:p.pos]))
	if c, _ := p.next(); c == ']' {
		if name == "" {
			return "", "", p.errorf("empty section name")
		}
		// The old `[section.sub]`: the subsection is lowercased too.
		section, sub, _ = strings.Cut(name, ".")
		return section, sub, nil
	}
	p.skipSpace(false)
	if c, _ := p.next(); c != '"' {
		return "", "", p.errorf("section %q: subsection must be quoted", name)
	}
	var b strings.Builder
	for {
		c, ok := p.next()
		switch {
		case !ok || c == '\n':
			return "", "", p.errorf("section %q: unterminated subsection", name)
		case c == '\\':
			// Git keeps the character after any backslash.
			if c, ok = p.next(); !ok || c == '\n' {
				return "", "", p.errorf("section %q: unterminated subsection", name)
			}
			b.WriteByte(c)
		case c == '"':
			if c, _ := p.next(); c != ']' {
				return "", "", p.errorf("section %q: expected ']' after the subsection", name)
			}
			return name, b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
}

// variable reads `key = value` or a bare `key`, up to the end of its line
// (continuations included).
func (p *configParser) variable() (key, value string, err error) {
	start := p.pos
	for {
		c, ok := p.peek()
		if !ok || !(isAlnum(c) || c == '-') {
			break
		}
		p.next()
	}
	key = strings.ToLower(string(p.data[start:p.pos]))
	p.skipSpace(false)
	c, ok := p.peek()
	switch {
	case !ok || c == '\n' || c == '#' || c == ';':
		if ok && c != '\n' {
			p.skipLine()
		}
		return key, "true", nil
	case c != '=':
		return "", "", p.errorf("key %q: expected '='", key)
	}
	p.next() // '='
	p.skipSpace(false)
	var b strings.Builder
	quoted := false
	blanks := 0 // blanks outside quotes not yet written: dropped at the end
	for {
		c, ok := p.next()
		switch {
		case !ok || c == '\n':
			if quoted {
				return "", "", p.errorf("key %q: unterminated quote", key)
			}
			return key, b.String(), nil
		case !quoted && (c == ' ' || c == '\t' || c == '\r'):
			blanks++
			continue
		case !quoted && (c == '#' || c == ';'):
			p.skipLine()
			return key, b.String(), nil
		}
		if b.Len() > 0 {
			b.WriteString(strings.Repeat(" ", blanks))
		}
		blanks = 0
		switch c {
		case '"':
			quoted = !quoted
		case '\\':
			e, ok := p.next()
			switch {
			case !ok:
				return "", "", p.errorf("key %q: backslash at the end of the file", key)
			case e == '\n':
				// A continuation line.
			case e == '\r' && p.pos < len(p.data) && p.data[p.pos] == '\n':
				p.next()
			case e == 'n':
				b.WriteByte('\n')
			case e == 't':
				b.WriteByte('\t')
			case e == 'b':
				b.WriteByte('\b')
			case e == '\\' || e == '"':
				b.WriteByte(e)
			default:
				return "", "", p.errorf("key %q: bad escape \\%c", key, e)
			}
		default:
			b.WriteByte(c)
		}
	}
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || '0' <= c && c <= '9' }
