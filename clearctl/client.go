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
	"unicode/utf8"
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
//     the bridge is closing);
//   - ctx ending first: an error wrapping ctx's error;
//   - port outside 1..65535 or an empty token: an error, and no request.
func Retire(ctx context.Context, port int, token string, req RetireRequest) (RetireResponse, error) {
	var none RetireResponse
	if port < 1 || port > 65535 {
		return none, fmt.Errorf("retire: bad port %d", port)
	}
	if token == "" {
		return none, errors.New("retire: empty token")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultClientTimeout)
		defer cancel()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return none, fmt.Errorf("retire: encode request: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+retirePath, bytes.NewReader(body))
	if err != nil {
		return none, fmt.Errorf("retire: build request: %w", err)
	}
	hreq.Header.Set("Authorization", "Bearer "+token)
	hreq.Header.Set("Content-Type", "application/json")

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
		return none, fmt.Errorf("retire: decode answer: %w", err)
	}
	return out, nil
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
	return cut(s, maxStatusBodyBytes)
}

// cut shortens s to at most n bytes, on a rune boundary, and marks the cut
// with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
