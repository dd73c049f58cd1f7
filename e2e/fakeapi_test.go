//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FakeAPI is a scripted stand-in for the Anthropic Messages API on
// 127.0.0.1. The real Claude Code CLI is pointed at it with
// ANTHROPIC_BASE_URL. Every POST /v1/messages of the main conversation takes
// the next Step of the script; the Step decides the model's turn (a tool call
// or a text reply) and may look at the request, in particular at the
// tool_result the CLI sent back for the previous call. Requests that are not
// part of the main conversation (side calls: no tools offered) are answered
// with plain text and do not consume the script.
type FakeAPI struct {
	fakeModel[APIRequest, Step]
}

// Turn is what the fake model answers: a tool call (Tool and Input set),
// several tool calls in one message (Also set too: they follow the first,
// as a model's parallel calls do), or a text reply (Text only).
type Turn struct {
	Text  string
	Tool  string
	Input any
	Also  []ToolUse
}

// ToolUse is one more tool call of a Turn.
type ToolUse struct {
	Tool  string
	Input any
}

// Step decides one model turn from the request it answers.
type Step func(r *APIRequest) Turn

// Say is a step that answers with text (stop_reason end_turn).
func Say(text string) Step { return func(*APIRequest) Turn { return Turn{Text: text} } }

// Call is a step that calls a tool (stop_reason tool_use).
func Call(tool string, input any) Step {
	return func(*APIRequest) Turn { return Turn{Tool: tool, Input: input} }
}

// APIRequest is one request the CLI made, as received and as answered.
type APIRequest struct {
	N         int // 1-based order of arrival, over all requests
	At        time.Time
	Path      string
	SessionID string // X-Claude-Code-Session-Id header
	Raw       []byte
	Body      MessagesRequest
	Side      bool // not part of the main conversation
	Scripted  bool // answered by a script step (false: side call or script exhausted)
	Answer    Turn
	ToolUseID string   // id of the (first) tool_use block answered, if any
	AlsoIDs   []string // ids of the Turn's Also calls, in order
	Answered  time.Time
}

// MessagesRequest is the part of a Messages API request the tests look at.
type MessagesRequest struct {
	Model    string           `json:"model"`
	System   json.RawMessage  `json:"system"`
	Messages []Message        `json:"messages"`
	Tools    []map[string]any `json:"tools"`
	Metadata struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Stream bool `json:"stream"`
}

// Message is one message; content is a string or a list of blocks.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Block is one content block of a message.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Blocks returns the message's content as blocks (a string content becomes
// one text block).
func (m Message) Blocks() []Block {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []Block{{Type: "text", Text: s}}
	}
	var bs []Block
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

// ToolResult is a tool_result block the CLI sent back.
type ToolResult struct {
	ToolUseID string
	Text      string // all text content, joined
	IsError   bool
}

// JSON decodes the result's text as JSON into v.
func (tr ToolResult) JSON(v any) error {
	return json.Unmarshal([]byte(tr.Text), v)
}

// ToolResults returns the tool_result blocks of the last user message.
func (r *APIRequest) ToolResults() []ToolResult {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		m := r.Body.Messages[i]
		if m.Role != "user" {
			continue
		}
		var out []ToolResult
		for _, b := range m.Blocks() {
			if b.Type != "tool_result" {
				continue
			}
			out = append(out, ToolResult{ToolUseID: b.ToolUseID, Text: blockText(b.Content), IsError: b.IsError})
		}
		return out
	}
	return nil
}

// LastToolResult returns the tool result in the last user message, if any.
func (r *APIRequest) LastToolResult() (ToolResult, bool) {
	trs := r.ToolResults()
	if len(trs) == 0 {
		return ToolResult{}, false
	}
	return trs[len(trs)-1], true
}

// UserText returns the text blocks of the last user message, joined.
func (r *APIRequest) UserText() string {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		m := r.Body.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []string
		for _, b := range m.Blocks() {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// MetadataSessionID returns the session_id inside metadata.user_id (a JSON
// string in 2.1.328), or "".
func (r *APIRequest) MetadataSessionID() string {
	var u struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal([]byte(r.Body.Metadata.UserID), &u) != nil {
		return ""
	}
	return u.SessionID
}

func blockText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []Block
	if json.Unmarshal(raw, &bs) != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// NewFakeAPI starts a fake on 127.0.0.1 with an empty script; it is closed
// when the test ends.
func NewFakeAPI(t testing.TB) *FakeAPI {
	t.Helper()
	f := &FakeAPI{}
	f.start(t, "fake API", f.serve)
	return f
}

// WaitToolCall waits until the fake has answered with a call of tool (the
// n-th such call, 1-based) and returns that request.
func (f *FakeAPI) WaitToolCall(timeout time.Duration, tool string, n int) (*APIRequest, bool) {
	var hit *APIRequest
	ok := f.WaitFor(timeout, func(reqs []*APIRequest) bool {
		k := 0
		for _, r := range reqs {
			if !r.Answered.IsZero() && r.Answer.Tool == tool {
				k++
				if k == n {
					hit = r
					return true
				}
			}
		}
		return false
	})
	return hit, ok
}

// WaitResultFor waits for the request that carries the tool_result of the
// given tool_use id.
func (f *FakeAPI) WaitResultFor(timeout time.Duration, toolUseID string) (*APIRequest, ToolResult, bool) {
	var hit *APIRequest
	var res ToolResult
	ok := f.WaitFor(timeout, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			for _, tr := range r.ToolResults() {
				if tr.ToolUseID == toolUseID {
					hit, res = r, tr
					return true
				}
			}
		}
		return false
	})
	return hit, res, ok
}

// Dump describes every request, for failure output.
func (f *FakeAPI) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, r := range f.reqs {
		fmt.Fprintf(&b, "#%d %s side=%v session=%s scripted=%v", r.N, r.At.Format("15:04:05.000"), r.Side, r.SessionID, r.Scripted)
		if trs := r.ToolResults(); len(trs) > 0 {
			for _, tr := range trs {
				fmt.Fprintf(&b, " result[%s err=%v]=%.300q", tr.ToolUseID, tr.IsError, tr.Text)
			}
		} else {
			fmt.Fprintf(&b, " user=%.120q", r.UserText())
		}
		if r.Answer.Tool != "" {
			in, _ := json.Marshal(r.Answer.Input)
			fmt.Fprintf(&b, " -> call %s %s (%s)", r.Answer.Tool, in, r.ToolUseID)
			for i, u := range r.Answer.Also {
				in, _ := json.Marshal(u.Input)
				fmt.Fprintf(&b, " + call %s %s (%s)", u.Tool, in, r.AlsoIDs[i])
			}
		} else {
			fmt.Fprintf(&b, " -> say %.80q", r.Answer.Text)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (f *FakeAPI) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	r := &APIRequest{At: time.Now(), Path: req.URL.Path, SessionID: req.Header.Get("X-Claude-Code-Session-Id"), Raw: raw}
	number := func(n int) { r.N = n }
	if req.Method != http.MethodPost || req.URL.Path != "/v1/messages" {
		r.Side = true
		f.take(r, number, true)
		f.logf("fake API: unexpected %s %s", req.Method, req.URL)
		http.NotFound(w, req)
		return
	}
	if err := json.Unmarshal(raw, &r.Body); err != nil {
		f.logf("fake API: bad request body: %v", err)
	}
	// The main conversation always offers tools (Bash, Read, ToolSearch, ...);
	// the CLI's side calls (titles, summaries, classifiers) offer none.
	r.Side = len(r.Body.Tools) == 0
	step, closed := f.take(r, number, r.Side)

	var turn Turn
	scripted := false
	switch {
	case closed:
		turn = Turn{Text: "(fake API: the test is over)"}
	case step != nil:
		turn = step(r)
		scripted = true
	case r.Side:
		turn = Turn{Text: "ok"}
	default:
		turn = Turn{Text: "(fake API: script exhausted)"}
		f.logf("fake API: request #%d of the main conversation has no script step left", r.N)
	}

	f.update(func() {
		r.Scripted = scripted
		if turn.Tool != "" {
			r.ToolUseID = fmt.Sprintf("toolu_e2e_%04d", r.N)
			for i := range turn.Also {
				r.AlsoIDs = append(r.AlsoIDs, fmt.Sprintf("toolu_e2e_also%d_%04d", i+1, r.N))
			}
		}
	})
	f.stream(w, r, turn)
	f.update(func() {
		r.Answer = turn
		r.Answered = time.Now()
	})
}

// stream writes the turn as Messages API server-sent events.
func (f *FakeAPI) stream(w http.ResponseWriter, r *APIRequest, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ev := func(name string, v map[string]any) {
		v["type"] = name
		j, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, j)
	}
	model := r.Body.Model
	if model == "" {
		model = "claude-fake"
	}
	ev("message_start", map[string]any{"message": map[string]any{
		"id": fmt.Sprintf("msg_e2e_%04d", r.N), "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1},
	}})
	stop := "end_turn"
	if turn.Tool != "" {
		uses := append([]ToolUse{{Tool: turn.Tool, Input: turn.Input}}, turn.Also...)
		ids := append([]string{r.ToolUseID}, r.AlsoIDs...)
		for i, u := range uses {
			input := u.Input
			if input == nil {
				input = map[string]any{}
			}
			in, _ := json.Marshal(input)
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{
				"type": "tool_use", "id": ids[i], "name": u.Tool, "input": map[string]any{},
			}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
			ev("content_block_stop", map[string]any{"index": i})
		}
		stop = "tool_use"
	} else {
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": turn.Text}})
		ev("content_block_stop", map[string]any{"index": 0})
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{})
	if fl != nil {
		fl.Flush()
	}
}
