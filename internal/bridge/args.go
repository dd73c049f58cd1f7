package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/internal/textcut"
)

// A tool's arguments are decoded once, into the tool's input struct, before
// its handler runs. Each exported field is one argument, named by its json
// tag; a field without omitempty or omitzero is required; JSON null counts
// as absent for every optional argument. A field is a string, an integer
// (a JSON integer literal), a bool or a []string, or one of the argument
// types below (an argValue), which check their own JSON and bounds.
// A refused argument comes back as an *argError whose text names it and
// says what it must be: the go-sdk's schema validation would name the
// field too, but not in words a model acts on (that "30" is not a number,
// that null means absent), so the tools take raw arguments and decode them
// here, against the same types their input schemas come from.

// An argError is a refused argument; its text names the argument and is
// what the model reads.
type argError struct {
	name, msg string
}

func (e *argError) Error() string { return fmt.Sprintf("argument %s: %s", e.name, e.msg) }

// An argValue is an argument type that decodes its own JSON (never null)
// and says in words what is wrong with a bad value.
type argValue interface {
	// decodeArg sets the value from raw, or returns what is wrong with it.
	decodeArg(raw json.RawMessage, b WaitBounds) (problem string)
	// want says what the argument must be, for "is required (...)".
	want() string
}

// seconds is a waiting tool's timeoutSeconds: a JSON integer literal from 1
// to the call's Max, in seconds. A string such as "30", a fraction, an
// exponent or a boolean is refused. Zero means the argument was not given.
type seconds int

func (s *seconds) decodeArg(raw json.RawMessage, b WaitBounds) string {
	_, hi := b.seconds()
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return fmt.Sprintf("must be a JSON integer from 1 to %d; got %s", hi, describe(raw))
	}
	if n < 1 || n > int64(hi) {
		return fmt.Sprintf("must be from 1 to %d; got %d", hi, n)
	}
	*s = seconds(n)
	return ""
}

func (*seconds) want() string { return "a whole number of seconds" }

// or returns the timeout s gives, or b's default when it gives none.
func (s seconds) or(b WaitBounds) time.Duration {
	if s == 0 {
		return b.Default
	}
	return time.Duration(s) * time.Second
}

// maxAwaitIDs bounds the ids one bee_await_action call may wait for.
const maxAwaitIDs = 100

// actionIDs is a list of 1 to maxAwaitIDs action ids, none of them blank.
type actionIDs []string

func (a *actionIDs) decodeArg(raw json.RawMessage, _ WaitBounds) string {
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return fmt.Sprintf("must be an array of action id strings; got %s", describe(raw))
	}
	switch {
	case len(ids) == 0:
		return "must hold at least one action id"
	case len(ids) > maxAwaitIDs:
		return fmt.Sprintf("holds %d ids; at most %d", len(ids), maxAwaitIDs)
	}
	for i, id := range ids {
		if strings.TrimSpace(id) == "" {
			return fmt.Sprintf("item %d is empty", i)
		}
	}
	*a = ids
	return ""
}

func (*actionIDs) want() string { return "an array of action ids" }

// An argField is one argument of an input struct.
type argField struct {
	name     string
	index    int
	required bool
}

// argFields returns the arguments of the input struct t, in field order.
// It panics on a field no argument can decode into: the tool table is
// built at start, so that is a programmer's error.
func argFields(t reflect.Type) []argField {
	var fs []argField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			panic(fmt.Sprintf("bridge: input %s field %s has no json name", t, f.Name))
		}
		if _, ok := reflect.New(f.Type).Interface().(argValue); !ok && plainWant(f.Type) == "" {
			panic(fmt.Sprintf("bridge: input %s field %s is of a type no argument decodes into", t, f.Name))
		}
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		fs = append(fs, argField{name: name, index: i, required: !optional})
	}
	return fs
}

// decodeArgs decodes raw, a call's arguments, into an In whose arguments
// are fields: absent or null arguments are an empty object; a name that is
// not an argument, a required argument missing, or a value of the wrong
// kind is refused with an *argError naming it.
func decodeArgs[In any](fields []argField, raw json.RawMessage, b WaitBounds) (In, error) {
	var in In
	raw = bytes.TrimSpace(raw)
	var obj map[string]json.RawMessage
	if len(raw) > 0 && !isNull(raw) {
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return in, &argError{name: "arguments", msg: "must be a JSON object"}
		}
	}
	if err := refuseUnknown(obj, fields); err != nil {
		return in, err
	}
	v := reflect.ValueOf(&in).Elem()
	for _, f := range fields {
		val := bytes.TrimSpace(obj[f.name])
		fv := v.Field(f.index)
		av, custom := fv.Addr().Interface().(argValue)
		want := plainWant(fv.Type())
		if custom {
			want = av.want()
		}
		if len(val) == 0 || isNull(val) {
			if f.required {
				return in, &argError{name: f.name, msg: "is required (" + want + ")"}
			}
			continue
		}
		if custom {
			if problem := av.decodeArg(val, b); problem != "" {
				return in, &argError{name: f.name, msg: problem}
			}
			continue
		}
		if !decodePlain(fv, val) {
			if !f.required {
				want += " or null"
			}
			return in, &argError{name: f.name, msg: fmt.Sprintf("must be %s; got %s", want, describe(val))}
		}
	}
	return in, nil
}

// plainWant says what an argument of type t must be, "" for a type no
// plain argument has.
func plainWant(t reflect.Type) string {
	switch {
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "a JSON integer"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "an array of strings"
	}
	return ""
}

// decodePlain sets fv from val, a plain argument's JSON (never null), and
// reports whether val was of the right kind. An integer must be written as
// one: "30", 30.5 and 1e1 are refused.
func decodePlain(fv reflect.Value, val json.RawMessage) bool {
	if k := fv.Kind(); k == reflect.Int || k == reflect.Int64 {
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			return false
		}
		fv.SetInt(n)
		return true
	}
	return json.Unmarshal(val, fv.Addr().Interface()) == nil
}

// refuseUnknown refuses the first (in sorted order) of obj's names that is
// not one of fields.
func refuseUnknown(obj map[string]json.RawMessage, fields []argField) error {
	var names, unknown []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	for name := range obj {
		if !slices.Contains(names, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	takes := "no arguments"
	if len(names) > 0 {
		takes = fmt.Sprint(names)
	}
	return &argError{name: unknown[0], msg: "unknown argument; this tool takes " + takes}
}

func isNull(v json.RawMessage) bool { return bytes.Equal(v, []byte("null")) }

// describe names the JSON type of v for an error message, with at most 40
// characters of the value itself.
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
