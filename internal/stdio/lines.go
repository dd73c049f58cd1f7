package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/textcut"
)

const (
	// readBufferSize is the size of the bufio.Reader over In. A longer line
	// is assembled from several reads.
	readBufferSize = 64 << 10
	// keepBufferBytes bounds the line buffer kept between lines: one that
	// grew larger for a long line is released afterwards.
	keepBufferBytes = 1 << 20
	// logPrefixBytes is the most of a rejected line that is logged.
	logPrefixBytes = 64
	// reasonBytes bounds decoder error text quoted in an error reply.
	reasonBytes = 200
	// maxSafeID is the largest numeric id the go-sdk keeps exactly: it
	// decodes ids as float64 and converts them to int64.
	maxSafeID = 1<<53 - 1
	// salvageBytes bounds the start of an over-long line that is kept to
	// find its id; a request's id and method come first in practice.
	salvageBytes = 4 << 10
)

// An item is one non-empty line from In, classified by readLoop.
type item struct {
	msg    jsonrpc.Message // the decoded message; nil if reject is set
	reject *rejection      // why the line is not passed on, if it is not

	token    string     // for a call: key of its params._meta.progressToken, "" if none
	cancels  bool       // msg is a notifications/cancelled naming cancelID
	cancelID jsonrpc.ID // the request id it names

	// salvaged is the id an over-long line's reply carries, if one was
	// recovered; Read replies with null instead when it is in flight.
	salvaged *jsonrpc.ID
}

// A rejection is a line that is answered with a JSON-RPC error (or, if
// silent, only logged) instead of being passed to the server.
type rejection struct {
	code    int64
	id      json.RawMessage // the reply's id; nil means null
	message string          // the error message sent to the client
	log     string          // fixed warn message
	attrs   []any           // log attributes
	silent  bool            // log only: the line is a message that must not be answered
}

// reply returns the JSON-RPC error response line for r.
func (r *rejection) reply() []byte {
	id := r.id
	if id == nil {
		id = json.RawMessage("null")
	}
	msg, _ := json.Marshal(r.message) // a string always marshals
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"error":{"code":`)
	b.WriteString(strconv.FormatInt(r.code, 10))
	b.WriteString(`,"message":`)
	b.Write(msg)
	b.WriteString("}}\n")
	return b.Bytes()
}

// readLoop reads In line by line and hands each classified line to Read
// through items. It returns when In fails or ends, or when the connection is
// closed while it waits for Read; readErr and readDone report why.
func (c *conn) readLoop(items chan<- item) {
	defer close(c.readDone)
	br := bufio.NewReaderSize(c.in, readBufferSize)
	var buf []byte
	for {
		line, n, tooLong, err := readLine(br, buf[:0], c.maxLine)
		var it item
		deliver := false
		if err == nil || errors.Is(err, io.EOF) { // a last line without "\n" still counts
			it, deliver = c.classify(line, n, tooLong)
		}
		if cap(line) > keepBufferBytes {
			buf = nil
		} else {
			buf = line[:0]
		}
		if deliver {
			select {
			case items <- it:
			case <-c.closed:
				c.readErr = io.EOF
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.readErr = io.EOF
			} else {
				c.readErr = fmt.Errorf("stdio: reading stdin: %w", err)
			}
			return
		}
	}
}

// readLine reads one line from br into buf, without its "\n". n counts the
// line's bytes. If there are more than limit, tooLong is true, the rest of
// the line is read and discarded without being held, and line holds only
// its start (at most limit and salvageBytes bytes), to recover an id from.
// err is nil when the line ended with "\n"; at the end of In it is io.EOF
// and line holds whatever came before it.
func readLine(br *bufio.Reader, buf []byte, limit int) (line []byte, n int64, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		complete := err == nil
		if complete {
			chunk = chunk[:len(chunk)-1]
		}
		n += int64(len(chunk))
		if !tooLong {
			if n > int64(limit) {
				tooLong = true
				keep := min(limit, salvageBytes)
				if len(buf) < keep {
					buf = append(buf, chunk[:min(len(chunk), keep-len(buf))]...)
				}
				buf = buf[:min(len(buf), keep)]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, n, tooLong, err
	}
}

// classify turns one line into an item. It reports false for a line that is
// skipped without a reply (empty or whitespace only).
func (c *conn) classify(line []byte, n int64, tooLong bool) (item, bool) {
	if tooLong {
		it := item{reject: &rejection{
			code:    jsonrpc.CodeInvalidRequest,
			message: fmt.Sprintf("invalid request: line exceeds %d bytes", c.maxLine),
			log:     "stdin line too long",
			attrs:   []any{logkey.Bytes, n, logkey.Limit, c.maxLine},
		}}
		if id, reply, ok := salvageID(line); ok {
			it.reject.id, it.salvaged = reply, &id
			it.reject.attrs = append(it.reject.attrs, logkey.RequestID, string(reply))
		}
		return it, true
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(bytes.TrimSpace(line)) == 0 {
		return item{}, false
	}
	return classifyLine(line), true
}

// classifyLine decodes one non-empty line, or says why it cannot be used.
// It validates the line itself before jsonrpc.DecodeMessage (which accepts
// trailing data, fractional or out-of-range ids, and params of any type) and
// checks that the decoder agrees with it afterwards.
func classifyLine(line []byte) item {
	if !utf8.Valid(line) {
		return parseError(line, "line is not valid UTF-8")
	}
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return parseError(line, err.Error())
	}
	switch bytes.TrimLeft(line, " \t\r\n")[0] {
	case '{':
	case '[':
		return invalid(line, nil, "batches are not supported", "stdin batch rejected")
	default:
		return invalid(line, nil, "message must be a JSON object", "stdin message is not json-rpc")
	}
	m, err := splitMembers(line)
	if err != nil {
		return invalid(line, nil, err.Error(), "stdin message is not json-rpc")
	}
	return m.classify(line)
}

// members holds the raw JSON-RPC members of a message object; nil means
// absent (a present null is "null").
type members struct {
	jsonrpc, id, method, params, result, error json.RawMessage
}

// splitMembers reads the members of the JSON object line, which must be
// valid JSON. A JSON-RPC member given twice is an error: decoders disagree
// on which copy wins.
func splitMembers(line []byte) (*members, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("reading object: %w", err)
	}
	m := &members{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("reading member name: %w", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("reading member %q: %w", name, err)
		}
		var dst *json.RawMessage
		switch name {
		case "jsonrpc":
			dst = &m.jsonrpc
		case "id":
			dst = &m.id
		case "method":
			dst = &m.method
		case "params":
			dst = &m.params
		case "result":
			dst = &m.result
		case "error":
			dst = &m.error
		default:
			continue
		}
		if *dst != nil {
			return nil, fmt.Errorf("member %q appears more than once", name)
		}
		*dst = v
	}
	return m, nil
}

// classify validates m, the members of line, as a JSON-RPC 2.0 message and
// decodes line with the go-sdk.
func (m *members) classify(line []byte) item {
	id, replyID, idProblem := parseID(m.id)
	bad := func(reason string) item {
		return invalid(line, replyID, reason, "stdin message is not json-rpc")
	}
	var version string
	if m.jsonrpc == nil || json.Unmarshal(m.jsonrpc, &version) != nil || version != "2.0" {
		return bad(`"jsonrpc" must be "2.0"`)
	}
	var method string
	switch {
	case m.method != nil:
		if m.method[0] != '"' || json.Unmarshal(m.method, &method) != nil {
			return bad(`"method" must be a string`)
		}
		if m.result != nil || m.error != nil {
			return bad(`a request must not have "result" or "error"`)
		}
		if m.params != nil && m.params[0] != '{' && m.params[0] != '[' {
			return bad(`"params" must be an object or an array`)
		}
		if m.id != nil && idProblem != "" {
			return bad(idProblem)
		}
	case m.result != nil || m.error != nil:
		if m.result != nil && m.error != nil {
			return bad(`a response must not have both "result" and "error"`)
		}
		if m.error != nil && !validErrorObject(m.error) {
			return bad(`"error" must be an object with an integer "code" and a string "message"`)
		}
		if m.error != nil && (m.id == nil || string(m.id) == "null") {
			// A valid error response the client could not tie to a request
			// of ours. It cannot be routed, and answering it could start a
			// loop of error replies.
			return item{reject: &rejection{
				silent: true,
				log:    "stdin error response without id dropped",
				attrs:  []any{logkey.Prefix, prefix(line)},
			}}
		}
		if m.id == nil {
			return bad("a response must have an id")
		}
		if idProblem != "" {
			return bad(idProblem)
		}
	default:
		return bad("message is neither a request nor a response")
	}

	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return bad("message could not be decoded: " + textcut.Bytes(err.Error(), reasonBytes))
	}
	switch msg := msg.(type) {
	case *jsonrpc.Request:
		if m.method == nil || msg.Method != method || msg.ID != id {
			return bad("message decoded inconsistently")
		}
		it := item{msg: msg}
		switch {
		case msg.IsCall():
			it.token = progressTokenKey(msg.Params, true)
		case msg.Method == methodCancelled:
			cancelID, ok := cancelledRequestID(msg.Params)
			if !ok {
				// The go-sdk would truncate a fractional id and cancel the
				// wrong request; a notification gets no reply.
				return item{reject: &rejection{
					silent: true,
					log:    "stdin cancellation without a valid request id dropped",
					attrs:  []any{logkey.Prefix, prefix(line)},
				}}
			}
			it.cancels, it.cancelID = true, cancelID
		}
		return it
	case *jsonrpc.Response:
		if m.method != nil || msg.ID != id {
			return bad("message decoded inconsistently")
		}
		return item{msg: msg}
	default:
		return bad("message decoded inconsistently")
	}
}

// salvageID recovers the id of a request from the start of a line too long
// to read whole. It reports ok only when that start shows, at the top level
// of a JSON object and each value complete (something follows it), exactly
// one "id" that is a valid id and a string "method", and no "result" or
// "error" (a response is never answered). Anything else, including JSON
// that goes wrong before the end of the prefix, recovers nothing.
func salvageID(prefix []byte) (id jsonrpc.ID, reply json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return jsonrpc.ID{}, nil, false
	}
	var raw json.RawMessage
	ids, method := 0, false
	for {
		tok, err := dec.Token()
		if err != nil {
			break // the end of the prefix, or JSON gone wrong
		}
		name, isName := tok.(string)
		if !isName {
			break
		}
		if name == "result" || name == "error" {
			return jsonrpc.ID{}, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		// A value that ends the prefix may be cut short (a number's digits).
		if len(bytes.TrimLeft(prefix[dec.InputOffset():], " \t\r\n")) == 0 {
			break
		}
		switch name {
		case "id":
			ids++
			raw = v
		case "method":
			if v[0] != '"' {
				return jsonrpc.ID{}, nil, false
			}
			method = true
		}
	}
	if ids != 1 || !method {
		return jsonrpc.ID{}, nil, false
	}
	id, reply, problem := parseID(raw)
	if problem != "" {
		return jsonrpc.ID{}, nil, false
	}
	return id, reply, true
}

// parseID parses the raw "id" member. For a valid id (a string, or an
// integer the go-sdk keeps exactly) it returns the id and its canonical JSON
// for error replies. For an absent id it returns zeros. Otherwise it returns
// why the id is unusable.
func parseID(raw json.RawMessage) (id jsonrpc.ID, reply json.RawMessage, problem string) {
	if raw == nil {
		return jsonrpc.ID{}, nil, ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, nil, `"id" is not a valid string`
		}
		canonical, _ := json.Marshal(s) // a string always marshals
		id, _ := jsonrpc.MakeID(s)      // a string is always an id
		return id, canonical, ""
	case c == '-' || (c >= '0' && c <= '9'):
		f, err := strconv.ParseFloat(string(raw), 64)
		switch {
		case err != nil:
			return jsonrpc.ID{}, nil, `"id" is not a representable number`
		case f != math.Trunc(f):
			return jsonrpc.ID{}, nil, `"id" must be an integer`
		case math.Abs(f) > maxSafeID:
			return jsonrpc.ID{}, nil, `"id" is out of range (at most 2^53-1 in magnitude)`
		}
		n := int64(f)
		id, _ := jsonrpc.MakeID(float64(n)) // a float64 is always an id
		return id, strconv.AppendInt(nil, n, 10), ""
	case c == 'n':
		return jsonrpc.ID{}, nil, `"id" must be a string or a number, not null`
	default:
		return jsonrpc.ID{}, nil, `"id" must be a string or a number`
	}
}

// validErrorObject reports whether raw is a JSON-RPC error object: an
// integer "code" and a string "message".
func validErrorObject(raw json.RawMessage) bool {
	if raw[0] != '{' {
		return false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return false
	}
	code, message := obj["code"], obj["message"]
	if code == nil || message == nil || message[0] != '"' {
		return false
	}
	_, err := strconv.ParseInt(string(code), 10, 64)
	return err == nil
}

// progressTokenKey returns a canonical key for the progress token in params:
// params._meta.progressToken of a request (inRequest), or params.progressToken
// of a notifications/progress. Equal tokens get equal keys however they were
// spelled, as the go-sdk re-encodes them. It returns "" if there is none.
func progressTokenKey(params json.RawMessage, inRequest bool) string {
	obj := objectMembers(params)
	if inRequest {
		obj = objectMembers(obj["_meta"])
	}
	raw := obj["progressToken"]
	if raw == nil {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return ""
	}
	key, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(key)
}

// cancelledRequestID returns the valid request id named by the params of a
// notifications/cancelled.
func cancelledRequestID(params json.RawMessage) (jsonrpc.ID, bool) {
	raw := objectMembers(params)["requestId"]
	id, _, problem := parseID(raw)
	if raw == nil || problem != "" {
		return jsonrpc.ID{}, false
	}
	return id, true
}

// objectMembers returns the members of raw if it is a JSON object, else nil.
func objectMembers(raw json.RawMessage) map[string]json.RawMessage {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return obj
}

// parseError rejects a line that is not JSON with -32700.
func parseError(line []byte, reason string) item {
	return item{reject: &rejection{
		code:    jsonrpc.CodeParseError,
		message: "parse error: " + textcut.Bytes(reason, reasonBytes),
		log:     "stdin line is not json",
		attrs:   []any{logkey.Prefix, prefix(line)},
	}}
}

// invalid rejects a line that is JSON but not a usable JSON-RPC message with
// -32600, replying with id (nil for null).
func invalid(line []byte, id json.RawMessage, reason, logMsg string) item {
	attrs := []any{logkey.Prefix, prefix(line)}
	if id != nil {
		attrs = append(attrs, logkey.RequestID, string(id))
	}
	return item{reject: &rejection{
		code:    jsonrpc.CodeInvalidRequest,
		id:      id,
		message: "invalid request: " + reason,
		log:     logMsg,
		attrs:   attrs,
	}}
}

// prefix returns the start of line for logs: never the whole of a long line.
func prefix(line []byte) string {
	if len(line) <= logPrefixBytes {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	return strings.ToValidUTF8(string(line[:logPrefixBytes]), "\uFFFD") + "…"
}

// idText formats id for an error message.
func idText(id jsonrpc.ID) string {
	if s, ok := id.Raw().(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(id.Raw())
}
