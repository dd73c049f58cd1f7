package clearctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/textcut"
)

const (
	maxAnswerBytes     = 64 << 10 // the most of an answer's body Retire reads
	maxStatusBodyBytes = 512      // the most of it a StatusError carries
)

// Retire asks the bridge listening on 127.0.0.1:port to retire its identity,
// authenticating with token, and returns the bridge's answer.
//
// The token goes only in the Authorization header; it is never part of the
// URL, a log line or an error. If ctx has no deadline, the call is bounded by
// DefaultClientTimeout. Redirects are not followed and no proxy is used.
//
// Errors:
//   - nothing listening on the port: an error wrapping both ErrNotListening
//     and the dial error;
//   - any answer but 200: a *StatusError (202: still running, and will
//     complete on its own; 401: wrong token; 500: the retire failed; 503:
//     the bridge is closing or busy);
//   - a 200 whose body is not a RetireResponse naming two different
//     identities: an error wrapping ErrNotABridge;
//   - ctx ending first: an error wrapping ctx's error;
//   - port outside 1..65535 or an empty token: an error, and no request.
func Retire(ctx context.Context, port int, token string, req RetireRequest) (RetireResponse, error) {
	var none RetireResponse
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultClientTimeout)
		defer cancel()
	}
	hreq, addr, err := newPost(ctx, "retire", port, token, retirePath, req)
	if err != nil {
		return none, err
	}
	resp, err := newClient().Do(hreq)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return none, fmt.Errorf("%w on %s: %w", ErrNotListening, addr, err)
		}
		return none, fmt.Errorf("retire: post to bridge on %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return none, fmt.Errorf("retire: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return none, &StatusError{Code: resp.StatusCode, Body: errorText(data)}
	}
	var out RetireResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return none, fmt.Errorf("retire: %w: %w", ErrNotABridge, err)
	}
	if !identity.IsID(out.Retired) || !identity.IsID(out.Current) || out.Retired == out.Current {
		return none, fmt.Errorf("retire: %w: %s", ErrNotABridge, errorText(data))
	}
	return out, nil
}

// newPost checks port and token and makes the POST of body, as JSON, to
// path on the bridge at 127.0.0.1:port, with the token in the
// Authorization header only. It returns the request and the bridge's
// address; op begins its errors.
func newPost(ctx context.Context, op string, port int, token, path string, body any) (*http.Request, string, error) {
	if port < 1 || port > 65535 {
		return nil, "", fmt.Errorf("%s: bad port %d", op, port)
	}
	if token == "" {
		return nil, "", fmt.Errorf("%s: empty token", op)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, "", fmt.Errorf("%s: encode request: %w", op, err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("%s: build request: %w", op, err)
	}
	hreq.Header.Set("Authorization", "Bearer "+token)
	hreq.Header.Set("Content-Type", "application/json")
	return hreq, addr, nil
}

// newClient returns the HTTP client both calls use.
func newClient() *http.Client {
	return &http.Client{
		// Proxy is nil: never send the token anywhere but the bridge.
		// No keep-alives: one request, and no idle connection left behind.
		Transport: &http.Transport{
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: maxAnswerBytes,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// errorText makes an answer's body fit a one-line error: valid UTF-8,
// whitespace runs (newlines too) flattened to one space, at most
// maxStatusBodyBytes and then "…".
func errorText(data []byte) string {
	s := strings.ToValidUTF8(string(data), "\uFFFD")
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxStatusBodyBytes {
		return s
	}
	return textcut.Bytes(s, maxStatusBodyBytes)
}
