package clearctl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzServer_Request throws arbitrary requests at the Server's handler. In
// host, "{port}" stands for the listening port; in auth, "{token}" for the
// right token.
func FuzzServer_Request(f *testing.F) {
	for _, seed := range []struct {
		method, path       string
		withOrigin         bool
		origin, host, auth string
		body               string
	}{
		{"POST", "/retire", false, "", "127.0.0.1:{port}", "Bearer {token}", `{"session_id":"s"}`},
		{"POST", "/retire", false, "", "localhost:{port}", "Bearer {token}", ""},
		{"POST", "/retire", false, "", "127.0.0.1:{port}", "bearer {token}", "{}"},
		{"POST", "/retire", false, "", "127.0.0.1:{port}", "Bearer {token}x", ""},
		{"POST", "/retire", false, "", "127.0.0.1:{port}", "", ""},
		{"POST", "/retire", true, "https://evil.example", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"POST", "/retire", true, "", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"POST", "/retire", false, "", "evil.example:{port}", "Bearer {token}", ""},
		{"POST", "/retire", false, "", "127.0.0.1", "Bearer {token}", ""},
		{"POST", "/retire/", false, "", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"POST", "/x/../retire", false, "", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"POST", "/%72etire", false, "", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"GET", "/retire", false, "", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"OPTIONS", "/retire", true, "https://evil.example", "127.0.0.1:{port}", "", ""},
		{"CONNECT", "/retire", false, "", "127.0.0.1:{port}", "Bearer {token}", ""},
		{"POST", "/retire", false, "", "127.0.0.1:{port}", "Bearer {token}", `{"session_id":`},
		{"POST", "/retire", false, "", "127.0.0.1:{port}", "Bearer {token}", `{"session_id":"` + strings.Repeat("a", MaxBodyBytes) + `"}`},
	} {
		f.Add(seed.method, seed.path, seed.withOrigin, seed.origin, seed.host, seed.auth, seed.body)
	}

	s := newTestServer(f, RetirerFunc(func(context.Context, RetireRequest) (RetireResponse, error) {
		return RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, nil
	}), nil)
	port := strconv.Itoa(s.Port())
	allowed := []int{200, 202, 400, 401, 403, 404, 405, 413, 500}

	f.Fuzz(func(t *testing.T, method, path string, withOrigin bool, origin, host, auth, body string) {
		host = strings.ReplaceAll(host, "{port}", port)
		auth = strings.ReplaceAll(auth, "{token}", testToken)
		req, err := http.NewRequestWithContext(t.Context(), method, "http://127.0.0.1:"+port+path, strings.NewReader(body))
		if err != nil {
			t.Skip("not a request net/http would build")
		}
		req.Host = host
		if withOrigin {
			req.Header.Set("Origin", origin)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}

		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)

		require.True(t, slices.Contains(allowed, rec.Code), "status %d", rec.Code)
		requireNoCORS(t, rec.Header())
		if rec.Code == 200 {
			require.False(t, withOrigin, "200 despite an Origin header")
			require.True(t, host == "127.0.0.1:"+port || host == "localhost:"+port, "200 for Host %q", host)
			scheme, tok, _ := strings.Cut(auth, " ")
			require.True(t, strings.EqualFold(scheme, "Bearer") && tok == testToken, "200 without the token")
			require.Equal(t, http.MethodPost, req.Method)
		}
	})
}
