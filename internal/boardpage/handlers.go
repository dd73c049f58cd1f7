package boardpage

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticDir embed.FS

// staticFS holds the page's script, style and icon.
var staticFS, _ = fs.Sub(staticDir, "static")

var templates = template.Must(template.New("").ParseFS(templateFS, "templates/*.html"))

// render executes a template into a buffer first, so that a template error
// becomes a 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		s.logger.Error("board page template failed", logkey.Template, name, logkey.Err, err)
		http.Error(w, "500 internal error: the page could not be drawn (see bee serve's log)", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// deny answers code with a page that says what happened and what to do,
// and nothing from the board. A refusal (401, 403, 503) closes the
// connection.
func (s *Server) deny(w http.ResponseWriter, code int, what, todo string) {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable:
		closeAfter(w)
	}
	s.render(w, code, "denied", struct{ Code, What, Todo string }{http.StatusText(code), what, todo})
}

// handleStatic serves the page's embedded script, style and icon.
func handleStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	data, err := fs.ReadFile(staticFS, name)
	if err != nil || strings.ContainsAny(name, "/\\") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(data)
}

// handlePage serves the whole page; it shows the session's flash once.
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	v := s.view(r.Context(), sess, cleanShow(q.Get("show")), cleanPlan(q.Get("plan")))
	s.sessMu.Lock()
	v.Flash, sess.flash = sess.flash, nil
	s.sessMu.Unlock()
	s.render(w, http.StatusOK, "page", v)
}

// handleFragment serves the parts of the page that change, for the page's
// script to put in place.
func (s *Server) handleFragment(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	s.render(w, http.StatusOK, "live", s.view(r.Context(), sess, cleanShow(q.Get("show")), cleanPlan(q.Get("plan"))))
}

// done sets the flash and sends the browser back to the view it came from
// (POST, redirect, GET: a reload never posts twice).
func (s *Server) done(w http.ResponseWriter, r *http.Request, sess *session, f *flash) {
	s.sessMu.Lock()
	sess.flash = f
	s.sessMu.Unlock()
	to := "/"
	if show := cleanShow(r.PostForm.Get("show")); show != showAll {
		to += "?show=" + show
	} else if plan := cleanPlan(r.PostForm.Get("plan")); plan != "" {
		to += "?plan=" + plan
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// lf turns the CRLF line ends a browser sends with a textarea into the
// LF that every other way onto the board uses.
func lf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// boardCtx bounds one request's work on the board.
func boardCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), boardTimeout)
}

func (s *Server) handlePost(w http.ResponseWriter, r *http.Request, sess *session) {
	f := postForm{
		Title: strings.TrimSpace(r.PostForm.Get("title")),
		Body:  lf(r.PostForm.Get("body")),
		To:    strings.TrimSpace(r.PostForm.Get("to")),
	}
	ctx, cancel := boardCtx(r)
	defer cancel()
	rec, err := s.board.Post(ctx, s.person, actions.Draft{To: f.To, Title: f.Title, Body: f.Body})
	if err != nil {
		s.done(w, r, sess, &flash{Error: true, Text: plainWords("post it", err), Post: f})
		return
	}
	s.logger.Info("board page posted", logkey.ActionID, rec.ID)
	s.done(w, r, sess, &flash{Text: "Posted " + rec.ID + " for " + actionView{Record: rec}.For() + ": " + rec.Title})
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, sess *session) {
	id := strings.TrimSpace(r.PostForm.Get("id"))
	ctx, cancel := boardCtx(r)
	defer cancel()
	rec, err := s.board.Cancel(ctx, s.person, id, lf(strings.TrimSpace(r.PostForm.Get("reason"))))
	if err != nil {
		s.done(w, r, sess, &flash{Error: true, Text: plainWords("cancel "+id, err)})
		return
	}
	s.logger.Info("board page cancelled", logkey.ActionID, rec.ID)
	s.done(w, r, sess, &flash{Text: "Cancelled " + rec.ID + ": " + rec.Title})
}

func (s *Server) handleReaddress(w http.ResponseWriter, r *http.Request, sess *session) {
	id := strings.TrimSpace(r.PostForm.Get("id"))
	ctx, cancel := boardCtx(r)
	defer cancel()
	rec, err := s.board.Readdress(ctx, s.person, id, strings.TrimSpace(r.PostForm.Get("to")))
	if err != nil {
		s.done(w, r, sess, &flash{Error: true, Text: plainWords("re-address "+id, err)})
		return
	}
	s.logger.Info("board page re-addressed", logkey.ActionID, rec.ID)
	s.done(w, r, sess, &flash{Text: "Sent " + rec.ID + " to " + actionView{Record: rec}.For() + ": " + rec.Title})
}
