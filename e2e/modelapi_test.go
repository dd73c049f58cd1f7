//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ModelAPI is a scripted stand-in for the model API of Codex CLI (the
// OpenAI Responses API, streamed) or Gemini CLI (the Gemini API's
// streamGenerateContent), on 127.0.0.1, as FakeAPI is for Claude Code.
// Every request of the main conversation takes the next ModelStep; the
// CLIs' side calls (Codex's title generation, which offers no tools;
// Gemini's model router, a non-streamed generateContent) are answered
// without consuming the script. Turn.Tool names a tool as the model calls
// it: mcp__bee__bee_wait_action for Codex (its namespace and name),
// mcp_bee_bee_wait_action for Gemini.
type ModelAPI struct {
	fakeModel[ModelRequest, ModelStep]
	wire wire
}

// ModelStep decides one model turn from the request it answers.
type ModelStep func(r *ModelRequest) Turn

// ModelRequest is one request a CLI made of the fake.
type ModelRequest struct {
	N        int
	At       time.Time
	Path     string
	Raw      []byte
	Side     bool
	Results  []ToolResult // tool results this request carries back, by call id
	User     string       // the last user text, when it carries no result
	Tools    []string     // the tools offered, by the name the model calls
	Answer   Turn
	CallID   string // the id of the call answered, if any
	Answered time.Time
}

// Result returns the tool result for call id, if this request carries it.
func (r *ModelRequest) Result(id string) (ToolResult, bool) {
	for _, tr := range r.Results {
		if tr.ToolUseID == id {
			return tr, true
		}
	}
	return ToolResult{}, false
}

// LastResult returns the last tool result the request carries.
func (r *ModelRequest) LastResult() (ToolResult, bool) {
	if len(r.Results) == 0 {
		return ToolResult{}, false
	}
	return r.Results[len(r.Results)-1], true
}

// A wire is one API's shape: how to read a request and write a turn.
type wire interface {
	// main reports whether path is a request of the main conversation
	// (streamed; side calls are answered by side).
	main(path string) bool
	parse(r *ModelRequest) error
	side(w http.ResponseWriter, r *ModelRequest)
	stream(w http.ResponseWriter, r *ModelRequest, turn Turn)
}

func newModelAPI(t testing.TB, wr wire) *ModelAPI {
	t.Helper()
	f := &ModelAPI{wire: wr}
	f.start(t, "fake model API", f.serve)
	return f
}

// WaitToolCall waits until the fake has answered with the n-th call of tool.
func (f *ModelAPI) WaitToolCall(timeout time.Duration, tool string, n int) (*ModelRequest, bool) {
	var hit *ModelRequest
	ok := f.WaitFor(timeout, func(reqs []*ModelRequest) bool {
		k := 0
		for _, r := range reqs {
			if !r.Answered.IsZero() && r.Answer.Tool == tool {
				if k++; k == n {
					hit = r
					return true
				}
			}
		}
		return false
	})
	return hit, ok
}

// WaitResultFor waits for the request that carries the result of call id.
func (f *ModelAPI) WaitResultFor(timeout time.Duration, id string) (*ModelRequest, ToolResult, bool) {
	var hit *ModelRequest
	var res ToolResult
	ok := f.WaitFor(timeout, func(reqs []*ModelRequest) bool {
		for _, r := range reqs {
			if tr, ok := r.Result(id); ok {
				hit, res = r, tr
				return true
			}
		}
		return false
	})
	return hit, res, ok
}

// MustToolCall waits for the n-th call of tool and fails the test without it.
func (f *ModelAPI) MustToolCall(tool string, n int, timeout time.Duration) *ModelRequest {
	f.t.Helper()
	r, ok := f.WaitToolCall(timeout, tool, n)
	if !ok {
		f.t.Fatalf("the model's call #%d of %s was not made within %v\n%s", n, tool, timeout, f.Dump())
	}
	return r
}

// MustResult waits for the result of the call answered in r.
func (f *ModelAPI) MustResult(r *ModelRequest, timeout time.Duration) (*ModelRequest, ToolResult) {
	f.t.Helper()
	next, tr, ok := f.WaitResultFor(timeout, r.CallID)
	if !ok {
		f.t.Fatalf("no result for %s (%s) within %v\n%s", r.Answer.Tool, r.CallID, timeout, f.Dump())
	}
	return next, tr
}

// Dump describes every request, for failure output.
func (f *ModelAPI) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, r := range f.reqs {
		fmt.Fprintf(&b, "#%d %s %s side=%v", r.N, r.At.Format("15:04:05.000"), r.Path, r.Side)
		for _, tr := range r.Results {
			fmt.Fprintf(&b, " result[%s err=%v]=%.300q", tr.ToolUseID, tr.IsError, tr.Text)
		}
		if len(r.Results) == 0 {
			fmt.Fprintf(&b, " user=%.120q", r.User)
		}
		if r.Answer.Tool != "" {
			in, _ := json.Marshal(r.Answer.Input)
			fmt.Fprintf(&b, " -> call %s %s (%s)", r.Answer.Tool, in, r.CallID)
		} else {
			fmt.Fprintf(&b, " -> say %.80q", r.Answer.Text)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (f *ModelAPI) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	r := &ModelRequest{At: time.Now(), Path: req.URL.Path, Raw: raw}
	main := req.Method == http.MethodPost && f.wire.main(req.URL.Path)
	if err := f.wire.parse(r); err != nil && main {
		f.logf("fake model API: bad request body: %v", err)
	}
	r.Side = r.Side || !main
	step, closed := f.take(r, func(n int) { r.N = n }, r.Side)
	if r.Side {
		f.wire.side(w, r)
		f.update(func() { r.Answered = time.Now() })
		return
	}
	var turn Turn
	switch {
	case closed:
		turn = Turn{Text: "(fake API: the test is over)"}
	case step != nil:
		turn = step(r)
	default:
		turn = Turn{Text: "(fake API: script exhausted)"}
		f.logf("fake model API: request #%d of the main conversation has no script step left", r.N)
	}
	f.update(func() {
		if turn.Tool != "" {
			r.CallID = fmt.Sprintf("call_e2e_%04d", r.N)
		}
	})
	f.wire.stream(w, r, turn)
	f.update(func() {
		r.Answer = turn
		r.Answered = time.Now()
	})
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, v any) {
	j, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", j)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// ---- Codex CLI: the OpenAI Responses API ----

// NewResponsesAPI is the fake model API for Codex CLI (POST /v1/responses,
// streamed).
func NewResponsesAPI(t testing.TB) *ModelAPI { return newModelAPI(t, responsesWire{}) }

type responsesWire struct{}

func (responsesWire) main(path string) bool { return path == "/v1/responses" }

func (responsesWire) parse(r *ModelRequest) error {
	var body struct {
		Tools []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
		Input []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			CallID  string          `json:"call_id"`
			Output  json.RawMessage `json:"output"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(r.Raw, &body); err != nil {
		return err
	}
	for _, t := range body.Tools {
		if t.Type == "namespace" {
			for _, in := range t.Tools {
				r.Tools = append(r.Tools, t.Name+"__"+in.Name)
			}
			continue
		}
		r.Tools = append(r.Tools, t.Name)
	}
	// Codex's side calls (a thread's title) offer no tools.
	r.Side = len(body.Tools) == 0
	// The results of the last turn's calls, after the last message.
	for i := len(body.Input) - 1; i >= 0; i-- {
		in := body.Input[i]
		if in.Type == "message" {
			if in.Role == "user" && len(r.Results) == 0 {
				for _, c := range in.Content {
					r.User += c.Text
				}
			}
			break
		}
		if in.Type == "function_call_output" {
			r.Results = append([]ToolResult{codexResult(in.CallID, in.Output)}, r.Results...)
		}
	}
	return nil
}

// codexOutput is how Codex CLI 0.171.0 hands an MCP tool's result to the
// model: "Wall time: X seconds\nOutput:\n" and the structured content as
// JSON (or the text), as a string, or as a list of input_text parts when
// the call failed ("tool call error: ...").
var codexOutput = regexp.MustCompile(`(?s)^Wall time: [0-9.]+ seconds\nOutput:\n?`)

func codexResult(id string, raw json.RawMessage) ToolResult {
	var text string
	if json.Unmarshal(raw, &text) != nil {
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var ps []string
		for _, p := range parts {
			ps = append(ps, p.Text)
		}
		text = strings.Join(ps, "\n")
	}
	text = codexOutput.ReplaceAllString(text, "")
	isErr := strings.HasPrefix(text, "tool call error") || strings.HasPrefix(text, "unsupported call")
	return ToolResult{ToolUseID: id, Text: strings.TrimSpace(text), IsError: isErr}
}

func (responsesWire) side(w http.ResponseWriter, r *ModelRequest) {
	if r.Path != "/v1/responses" {
		http.NotFound(w, nil)
		return
	}
	responsesWire{}.stream(w, r, Turn{Text: "bee e2e"})
}

func (responsesWire) stream(w http.ResponseWriter, r *ModelRequest, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	id := fmt.Sprintf("resp_e2e_%04d", r.N)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	var item map[string]any
	if turn.Tool != "" {
		ns, name := "", turn.Tool
		if i := strings.LastIndex(turn.Tool, "__"); i > 0 {
			ns, name = turn.Tool[:i], turn.Tool[i+2:]
		}
		args := turn.Input
		if args == nil {
			args = map[string]any{}
		}
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_" + r.CallID, "call_id": r.CallID, "name": name, "arguments": string(a)}
		if ns != "" {
			item["namespace"] = ns
		}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_e2e_%04d", r.N), "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": turn.Text, "annotations": []any{}}}}
	}
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1, "total_tokens": 11,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}})
}

// ---- Gemini CLI: the Gemini API ----

// NewGeminiAPI is the fake model API for Gemini CLI
// (POST /v1beta/models/<model>:streamGenerateContent?alt=sse; the model
// router's generateContent is a side call).
func NewGeminiAPI(t testing.TB) *ModelAPI { return newModelAPI(t, geminiWire{}) }

type geminiWire struct{}

func (geminiWire) main(path string) bool { return strings.HasSuffix(path, ":streamGenerateContent") }

func (geminiWire) parse(r *ModelRequest) error {
	var body struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string `json:"text"`
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Raw, &body); err != nil {
		return err
	}
	for _, t := range body.Tools {
		for _, fd := range t.FunctionDeclarations {
			r.Tools = append(r.Tools, fd.Name)
		}
	}
	if n := len(body.Contents); n > 0 {
		last := body.Contents[n-1]
		for _, p := range last.Parts {
			if fr := p.FunctionResponse; fr != nil {
				r.Results = append(r.Results, geminiResult(fr.ID, fr.Response))
			} else if last.Role == "user" {
				r.User += p.Text
			}
		}
	}
	return nil
}

// geminiResult reads a functionResponse: Gemini CLI 0.61.0 hands the
// model an MCP tool's text content (not its structured content) as
// response.output, wrapped in <untrusted_context>, or response.error.
func geminiResult(id string, raw json.RawMessage) ToolResult {
	var resp struct {
		Output string `json:"output"`
		Error  string `json:"error"`
	}
	_ = json.Unmarshal(raw, &resp)
	text := resp.Output
	text = strings.TrimPrefix(strings.TrimSpace(text), "<untrusted_context>")
	text = strings.TrimSuffix(strings.TrimSpace(text), "</untrusted_context>")
	if resp.Error != "" {
		return ToolResult{ToolUseID: id, Text: resp.Error, IsError: true}
	}
	return ToolResult{ToolUseID: id, Text: strings.TrimSpace(text), IsError: strings.Contains(text, "MCP tool") && strings.Contains(text, "error")}
}

func (geminiWire) side(w http.ResponseWriter, r *ModelRequest) {
	if !strings.HasSuffix(r.Path, ":generateContent") {
		http.NotFound(w, nil)
		return
	}
	// The model router asks how complex the prompt is.
	text, _ := json.Marshal(map[string]any{"complexity_reasoning": "e2e", "complexity_score": 10})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(geminiResponse(map[string]any{"text": string(text)}))
}

func geminiResponse(part map[string]any) map[string]any {
	return map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
		"modelVersion":  "gemini-e2e",
	}
}

func (geminiWire) stream(w http.ResponseWriter, r *ModelRequest, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	part := map[string]any{"text": turn.Text}
	if turn.Tool != "" {
		args := turn.Input
		if args == nil {
			args = map[string]any{}
		}
		part = map[string]any{"functionCall": map[string]any{"id": r.CallID, "name": turn.Tool, "args": args}}
	}
	sse(w, "", geminiResponse(part))
}

// claimedID reads the id of the action a wait claimed from what the model
// read: the structured content as JSON (Codex CLI, Claude Code) or the
// text (Gemini CLI: `call bee_finish_action with id "a-1"`).
func claimedID(tr ToolResult) (string, bool) {
	var p Page
	if json.Unmarshal([]byte(tr.Text), &p) == nil {
		if len(p.Records) == 1 {
			return p.Records[0].IDString(), true
		}
		return "", false
	}
	m := regexp.MustCompile(`with id "([^"]+)"`).FindStringSubmatch(tr.Text)
	if m == nil {
		return "", false
	}
	return m[1], true
}
