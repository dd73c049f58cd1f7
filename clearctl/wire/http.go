package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A conn is one loopback TCP connection whose every operation returns,
// with an error wrapping ctx's, as soon as the context it was dialled with
// ends.
type conn interface {
	// Write writes all of p.
	Write(p []byte) error
	// Read reads into p; io.EOF when the bridge has closed the connection.
	Read(p []byte) (int, error)
	// Close closes the connection; it may be called once.
	Close()
}

// An answer is what a bridge answered: the status and the body, at most
// maxAnswerBytes of it.
type answer struct {
	code int
	body []byte
}

// The ways an exchange fails, for each call to say in its own words.
var (
	// errRefused: nothing accepts connections on the port (it wraps the
	// connect error, ECONNREFUSED).
	errRefused = errors.New("connection refused")
	// errLost: the connection broke, or ended, before the whole answer came.
	errLost = errors.New("connection lost")
)

// checkTarget reports why port and token cannot be used: op begins the
// error, which never holds the token.
func checkTarget(op string, port int, token string) error {
	switch {
	case port < 1 || port > 65535:
		return fmt.Errorf("%s: bad port %d", op, port)
	case token == "":
		return fmt.Errorf("%s: empty token", op)
	case strings.ContainsAny(token, "\r\n \t") || !isASCII(token):
		return fmt.Errorf("%s: the token holds a space, a line break or a byte that is not ASCII; the run file is damaged", op)
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// post sends body, as JSON, to path on the bridge at 127.0.0.1:port with
// the token in the Authorization header only, and returns its answer and
// the bridge's address. Its errors wrap ctx's error when ctx ended first,
// errRefused when nothing listens, errLost when the connection broke
// before the whole answer came, and ErrNotABridge when the answer is not
// HTTP a bridge would give. port and token must have passed checkTarget.
func post(ctx context.Context, port int, token, path string, body any) (answer, string, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	data, err := json.Marshal(body)
	if err != nil {
		return answer{}, addr, fmt.Errorf("encode request: %w", err)
	}
	var req bytes.Buffer
	// HTTP/1.0: the bridge answers whole, never in chunks, and closes the
	// connection after its answer.
	fmt.Fprintf(&req, "POST %s HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		path, addr, token, len(data))
	req.Write(data)

	c, err := dial(ctx, port)
	if err != nil {
		return answer{}, addr, err
	}
	defer c.Close()
	if err := c.Write(req.Bytes()); err != nil {
		return answer{}, addr, err
	}
	a, err := readAnswer(c)
	return a, addr, err
}

// readAnswer reads an HTTP/1.x answer from c: its status line, headers (at
// most maxAnswerBytes) and body (to its Content-Length or the end of the
// connection; at most maxAnswerBytes is kept).
func readAnswer(c conn) (answer, error) {
	var buf []byte
	chunk := make([]byte, 4096)
	end := -1
	for end < 0 {
		if len(buf) > maxAnswerBytes {
			return answer{}, fmt.Errorf("%w: headers over %d bytes", ErrNotABridge, maxAnswerBytes)
		}
		n, err := c.Read(chunk)
		buf = append(buf, chunk[:n]...)
		end = bytes.Index(buf, []byte("\r\n\r\n"))
		if end >= 0 {
			break
		}
		if err != nil {
			return answer{}, lost(err, "before the answer's headers ended")
		}
	}
	head, body := string(buf[:end]), buf[end+4:]
	lines := strings.Split(head, "\r\n")
	proto, rest, _ := strings.Cut(lines[0], " ")
	codeText, _, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(codeText)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || code < 100 || code > 999 {
		return answer{}, fmt.Errorf("%w: the answer begins %q", ErrNotABridge, errorText([]byte(lines[0])))
	}
	length := -1
	for _, line := range lines[1:] {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return answer{}, fmt.Errorf("%w: Content-Length %q", ErrNotABridge, errorText([]byte(value)))
			}
			length = n
		case "transfer-encoding":
			if !strings.EqualFold(value, "identity") {
				return answer{}, fmt.Errorf("%w: an answer in %q, where a bridge answers HTTP/1.0 whole", ErrNotABridge, errorText([]byte(value)))
			}
		}
	}
	want := maxAnswerBytes
	if length >= 0 {
		want = min(length, maxAnswerBytes)
	}
	for len(body) < want {
		n, err := c.Read(chunk)
		body = append(body, chunk[:n]...)
		if errors.Is(err, io.EOF) && length < 0 {
			break // the answer ends with the connection
		}
		if err != nil {
			return answer{}, lost(err, "in the middle of the answer")
		}
	}
	return answer{code: code, body: body[:min(len(body), want)]}, nil
}

// lost wraps a read error: ctx's as it is, anything else as errLost.
func lost(err error, where string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w %s: %w", errLost, where, err)
}
