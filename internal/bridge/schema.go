package bridge

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pathglob"
)

// The tools' JSON schemas come from their Go types (jsonschema.For, as
// mcp.AddTool infers them), with descriptions from the fields' jsonschema
// tags. Deriving them takes reflection and a marshal per tool: a third of
// a bridge's start-up CPU. So they are derived once, when the types
// change, into schemas.json, which the bridge serves as it is;
// TestToolSchemas_UpToDate fails while that file differs from what the
// types say, and rewrites it under -update. What the types cannot say comes from typeSchemas: the bounds of
// timeoutSeconds, what an action id list holds. Two rules hold for every
// tool: an optional argument may be null (decodeArgs takes null for
// absent), and an answer requires no property, because a refusal's
// structured content holds only the Guidance fields (the client validates
// whatever structured content it gets against the output schema, on an
// error result too).

// regenerate is the command that rewrites schemas.json.
const regenerate = "go test ./internal/bridge -run TestToolSchemas_UpToDate -update"

// toolSchemas are one tool's input and output schemas as JSON.
type toolSchemas struct {
	Input  schemaJSON `json:"input"`
	Output schemaJSON `json:"output"`
}

// schemaJSON is a schema as JSON. Unlike json.RawMessage, decoding keeps
// the bytes decoded from instead of copying them: servedSchemas decodes
// schemasJSON, which nothing ever changes, so the schemas stay in the
// binary's data (shared by every bridge through the page cache) rather
// than in each bridge's heap. Decode only such input into it.
type schemaJSON []byte

// MarshalJSON returns s as it is (encoding/json checks and compacts it).
func (s schemaJSON) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return s, nil
}

// UnmarshalJSON keeps data itself: see schemaJSON.
func (s *schemaJSON) UnmarshalJSON(data []byte) error {
	*s = data
	return nil
}

//go:embed schemas.json
var schemasJSON []byte

// servedSchemas reads schemas.json: the schemas the bridge serves, by tool
// name.
var servedSchemas = sync.OnceValues(func() (map[string]toolSchemas, error) {
	var m map[string]toolSchemas
	if err := json.Unmarshal(schemasJSON, &m); err != nil {
		return nil, fmt.Errorf("schemas.json: %w (regenerate it: %s)", err, regenerate)
	}
	return m, nil
})

// marshalSchemas returns in and out as JSON.
func marshalSchemas(in, out *jsonschema.Schema) (toolSchemas, error) {
	var s toolSchemas
	var err error
	if s.Input, err = json.Marshal(in); err != nil {
		return s, fmt.Errorf("input schema: %w", err)
	}
	if s.Output, err = json.Marshal(out); err != nil {
		return s, fmt.Errorf("output schema: %w", err)
	}
	return s, nil
}

// derivedSchemas derives every tool's schemas from its types, and returns
// them as schemas.json should hold them.
func derivedSchemas() ([]byte, error) {
	m := make(map[string]toolSchemas)
	for _, d := range toolTable() {
		s, err := d.schemas()
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", d.name, err)
		}
		m[d.name] = s
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// typeSchemas are the schemas of the types whose Go type alone says too
// little.
func typeSchemas() map[reflect.Type]*jsonschema.Schema {
	def, max := DefaultWaitBounds.seconds()
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[seconds](): {
			Type:    "integer",
			Minimum: jsonschema.Ptr(1.0),
			Maximum: jsonschema.Ptr(float64(max)),
			Default: json.RawMessage(strconv.Itoa(def)),
		},
		reflect.TypeFor[actionIDs](): {
			Type:     "array",
			Items:    &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1)},
			MinItems: jsonschema.Ptr(1),
			MaxItems: jsonschema.Ptr(maxAwaitIDs),
		},
		reflect.TypeFor[pathPatterns](): {
			Type:     "array",
			Items:    &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(pathglob.MaxPatternLen)},
			MinItems: jsonschema.Ptr(1),
			MaxItems: jsonschema.Ptr(pathglob.MaxPatterns),
		},
		reflect.TypeFor[optBool](): {Type: "boolean"},
		// No enum: a state a newer board adds must not make a client
		// refuse an answer that carries it.
		reflect.TypeFor[actions.State](): {
			Type:        "string",
			Description: "open, blocked (waits for the actions in blockedBy), claimed, done, failed or cancelled",
		},
		// Plans (plantools.go).
		reflect.TypeFor[priority](): {
			Type:    "integer",
			Minimum: jsonschema.Ptr(float64(actions.MinPriority)),
			Maximum: jsonschema.Ptr(float64(actions.MaxPriority)),
			Default: json.RawMessage(strconv.Itoa(actions.DefaultPriority)),
		},
		reflect.TypeFor[afterIDs](): {
			Type:     "array",
			Items:    &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1)},
			MaxItems: jsonschema.Ptr(actions.MaxAfter),
		},
		reflect.TypeFor[planEntries](): planEntriesSchema(),
	}
}

// planEntriesSchema is the schema of bee_post_plan's steps.
func planEntriesSchema() *jsonschema.Schema {
	entry, err := jsonschema.For[planEntry](&jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("bridge: plan entry schema: %v", err)) // the type is wrong
	}
	for name, p := range entry.Properties {
		if !slices.Contains(entry.Required, name) {
			allowNull(p)
		}
	}
	entry.Properties["priority"].Minimum = jsonschema.Ptr(float64(actions.MinPriority))
	entry.Properties["priority"].Maximum = jsonschema.Ptr(float64(actions.MaxPriority))
	entry.Properties["key"].MaxLength = jsonschema.Ptr(actions.MaxKeyLen)
	return &jsonschema.Schema{
		Type:     "array",
		Items:    entry,
		MinItems: jsonschema.Ptr(1),
		MaxItems: jsonschema.Ptr(actions.MaxPlan),
	}
}

// inputSchema is the input schema of a tool whose arguments decode into In.
func inputSchema[In any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: typeSchemas()})
	if err != nil {
		return nil, err
	}
	for name, p := range s.Properties {
		if !slices.Contains(s.Required, name) {
			allowNull(p)
		}
	}
	return s, nil
}

// outputSchema is the output schema of a tool that answers an Out.
func outputSchema[Out any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[Out](&jsonschema.ForOptions{TypeSchemas: typeSchemas()})
	if err != nil {
		return nil, err
	}
	s.Required = nil // a refusal carries only the guidance
	return s, nil
}

// allowNull adds null to the types p allows.
func allowNull(p *jsonschema.Schema) {
	switch {
	case p.Type != "":
		p.Types, p.Type = []string{p.Type, "null"}, ""
	case len(p.Types) > 0 && !slices.Contains(p.Types, "null"):
		p.Types = append(p.Types, "null")
	}
}
