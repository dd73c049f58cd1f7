package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/tractat-us/bee/internal/textcut"
)

// args holds a tool call's arguments by name, still undecoded, so that
// each one can be checked against the contract and refused by name. The
// go-sdk's schema validation would name the field too, but it cannot say
// that null means absent or that "30" is not a number in plain words.
type args map[string]json.RawMessage

// An argError is a refused argument; its text names the argument and is
// what the model reads.
type argError struct {
	name, msg string
}

func (e *argError) Error() string { return fmt.Sprintf("argument %s: %s", e.name, e.msg) }

// parseArgs decodes raw as a JSON object of arguments. Absent or null
// arguments are an empty object. Names outside allowed are refused.
func parseArgs(raw json.RawMessage, allowed ...string) (args, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return args{}, nil
	}
	var a args
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		return nil, &argError{name: "arguments", msg: "must be a JSON object"}
	}
	var unknown []string
	for name := range a {
		ok := false
		for _, w := range allowed {
			ok = ok || name == w
		}
		if !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &argError{name: unknown[0], msg: fmt.Sprintf("unknown argument; this tool takes %v", allowed)}
	}
	return a, nil
}

// present reports whether name was given with a value other than null.
func (a args) present(name string) bool {
	v, ok := a[name]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// describe names the JSON type of v for an error message.
func describe(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string " + textcut.Runes(string(v), 40)
	case 't', 'f':
		return "a boolean " + string(v)
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 'n':
		return "null"
	}
	return textcut.Runes(string(v), 40)
}

// integer returns the named argument as an integer in [min, max], or def
// when it is absent or null. Only a JSON integer literal is accepted: a
// string such as "30", a fraction, an exponent or a boolean is refused.
func (a args) integer(name string, min, max, def int) (int, error) {
	if !a.present(name) {
		return def, nil
	}
	v := bytes.TrimSpace(a[name])
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, &argError{name: name, msg: fmt.Sprintf("must be a JSON integer from %d to %d; got %s", min, max, describe(v))}
	}
	if n < int64(min) || n > int64(max) {
		return 0, &argError{name: name, msg: fmt.Sprintf("must be from %d to %d; got %d", min, max, n)}
	}
	return int(n), nil
}

// optString returns the named argument as a string; absent and null are "".
func (a args) optString(name string) (string, error) {
	if !a.present(name) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err != nil {
		return "", &argError{name: name, msg: fmt.Sprintf("must be a string or null; got %s", describe(a[name]))}
	}
	return s, nil
}

// str returns the named argument, which must be present and a string.
func (a args) str(name string) (string, error) {
	if !a.present(name) {
		return "", &argError{name: name, msg: "is required (a string)"}
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err != nil {
		return "", &argError{name: name, msg: fmt.Sprintf("must be a string; got %s", describe(a[name]))}
	}
	return s, nil
}
