package boardpage

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/loopback"
)

const (
	loginPath  = "/login"
	cookieBase = "bee_session_" // + the port: browsers share cookies across ports
	csrfField  = "csrf"

	// contentSecurityPolicy allows the page's own script, style and icon
	// and nothing else: no inline script or style, no other origin, no
	// plugins, no framing, forms only back to the page.
	contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

// A session is the one browser that used the login token.
type session struct {
	sum   [sha256.Size]byte // SHA-256 of the cookie's value
	csrf  string            // the CSRF token of its forms
	flash *flash            // what the next full page shows once, if anything
}

// routes is the whole request path: the guard, then the mux.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /static/{name}", handleStatic)
	mux.HandleFunc("GET "+loginPath, s.handleLogin)
	mux.HandleFunc("GET /{$}", s.signedIn(s.handlePage))
	mux.HandleFunc("GET /fragment", s.signedIn(s.handleFragment))
	mux.HandleFunc("GET /events", s.signedIn(s.handleEvents))
	mux.HandleFunc("POST /post", s.signedIn(s.checked(s.handlePost)))
	mux.HandleFunc("POST /cancel", s.signedIn(s.checked(s.handleCancel)))
	mux.HandleFunc("POST /readdress", s.signedIn(s.checked(s.handleReaddress)))
	mux.HandleFunc("POST /answer", s.signedIn(s.checked(s.handleAnswer)))
	mux.HandleFunc("POST /decline", s.signedIn(s.checked(s.handleDecline)))
	return s.guard(mux)
}

// guard sets the security headers on every answer and refuses (403) a
// request from another origin or for another host before anything else.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if reason := s.refusal(r); reason != "" {
			s.logger.Warn("board page request refused", logkey.Reason, reason, logkey.Remote, r.RemoteAddr)
			closeAfter(w)
			http.Error(w, "403 forbidden: this page answers only itself, at 127.0.0.1 or localhost", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusal says why r must be refused with 403, or "" if it may go on: a
// Host other than ours (DNS rebinding), an Origin other than the request's
// own (http://<its Host>: the page at localhost and the page at 127.0.0.1
// are two origins), or a form from another origin.
//
// A same-origin Origin is fine: browsers send one with every form POST.
// Under this page's Referrer-Policy: no-referrer, Chromium sends "Origin:
// null" with the page's own forms, so "null" passes when the browser's
// Sec-Fetch-Site, which no page can set, says same-origin. Whether a POST
// comes from another origin is net/http's CrossOriginProtection's call.
func (s *Server) refusal(r *http.Request) string {
	if !s.http.HostOK(r) {
		return "host"
	}
	site := r.Header.Values("Sec-Fetch-Site")
	sameOrigin := len(site) == 1 && site[0] == "same-origin"
	switch origins := r.Header.Values("Origin"); {
	case len(origins) > 1:
		return "origin"
	case len(origins) == 1:
		if o := origins[0]; o != "http://"+r.Host && (o != "null" || !sameOrigin) {
			return "origin"
		}
	}
	if len(site) > 1 {
		return "sec-fetch-site"
	}
	if err := s.cop.Check(r); err != nil {
		return "cross-origin"
	}
	return ""
}

// closeAfter makes net/http close the connection once w's answer is sent:
// a refused connection is not kept for another request.
func closeAfter(w http.ResponseWriter) { w.Header().Set("Connection", "close") }

// cookieName is the session cookie's name on this Server's port.
func (s *Server) cookieName() string { return cookieBase + strconv.Itoa(s.Port()) }

// handleLogin trades the one-time login token for the session cookie and
// redirects to the clean URL. A browser already signed in just goes to the
// page; any other request gets 403 and no data.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if s.session(r) != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	sum := sha256.Sum256([]byte(r.URL.Query().Get("token")))
	if subtle.ConstantTimeCompare(sum[:], s.loginSum[:]) != 1 || !s.loginUsed.CompareAndSwap(false, true) {
		s.logger.Warn("board page login refused", logkey.Remote, r.RemoteAddr)
		s.deny(w, http.StatusForbidden, "This sign-in link is wrong or has been used already.",
			"Each link bee serve prints signs in one browser, once. Stop bee serve and start it again for a new link.")
		return
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	sess := &session{sum: sha256.Sum256([]byte(value)), csrf: s.csrfFor(value)}
	s.sessMu.Lock()
	s.sess = sess
	s.sessMu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name:     s.cookieName(),
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	s.logger.Info("board page signed in", logkey.Remote, r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// csrfFor derives the CSRF token of the session whose cookie holds value.
func (s *Server) csrfFor(value string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("csrf\x00" + value))
	return hex.EncodeToString(m.Sum(nil))
}

// session returns the session r's cookie names, or nil.
func (s *Server) session(r *http.Request) *session {
	c, err := r.Cookie(s.cookieName())
	if err != nil {
		return nil
	}
	sum := sha256.Sum256([]byte(c.Value))
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.sess == nil || subtle.ConstantTimeCompare(sum[:], s.sess.sum[:]) != 1 {
		return nil
	}
	return s.sess
}

// A sessionHandler is a handler that runs only for the signed-in browser.
type sessionHandler func(w http.ResponseWriter, r *http.Request, sess *session)

// signedIn answers 401, with no board data, unless r carries the session
// cookie, and 503 when the connection cannot be admitted among
// MaxSignedInConns.
func (s *Server) signedIn(h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := s.session(r)
		if sess == nil {
			s.deny(w, http.StatusUnauthorized, "Not signed in.",
				"Open the link bee serve printed (it signs in one browser, once). If you have used it already, stop bee serve and start it again for a new one.")
			return
		}
		if !loopback.Admit(r) {
			s.logger.Warn("board page request refused", logkey.Reason, "too many connections", logkey.Limit, MaxSignedInConns)
			s.deny(w, http.StatusServiceUnavailable, fmt.Sprintf("Too many connections: the board page serves %d at once.", MaxSignedInConns),
				"Close some of the board's tabs or windows, then reload.")
			return
		}
		h(w, r, sess)
	}
}

// checked refuses (403) a form whose body is too large or that lacks the
// session's CSRF token; the token is compared in constant time.
func (s *Server) checked(h sessionHandler) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
		if err := r.ParseForm(); err != nil {
			code := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				code = http.StatusRequestEntityTooLarge
			}
			s.deny(w, code, "The form could not be read.", err.Error())
			return
		}
		got := r.PostForm.Get(csrfField)
		if subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			s.logger.Warn("board page form refused", logkey.Reason, "csrf", logkey.Remote, r.RemoteAddr)
			s.deny(w, http.StatusForbidden, "This form did not come from the board page.",
				"Forms carry a token from the page they are on. Reload the page and try again.")
			return
		}
		h(w, r, sess)
	}
}
