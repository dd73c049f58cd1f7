package repo

import (
	"net/url"
	"path"
	"strings"
)

// RemoteName normalises a git remote URL to "host/owner/name", so that
// every form of one repository's URL gives one name:
//
//	https://github.com/Tractat-us/bee.git        github.com/tractat-us/bee
//	git@github.com:tractat-us/bee.git            github.com/tractat-us/bee
//	ssh://git@github.com:22/tractat-us/bee       github.com/tractat-us/bee
//	https://user:token@github.com/tractat-us/bee github.com/tractat-us/bee
//
// It drops the scheme, the user and password (a token never reaches a
// name), the port, a remote helper's "transport::" prefix, a trailing
// ".git" and slashes, and folds case: the host's, which DNS ignores, and
// the path's too, which the big forges ignore; folding it can only make
// two repositories' names meet (their reservations then conflict), never
// split one repository's. It reports false for a local origin (a path, or
// file://), which is named by the repository it points to instead. A URL
// it cannot take apart is kept whole, lower-cased, without ".git".
func RemoteName(raw string) (string, bool) {
	u := strings.TrimSpace(raw)
	if i := strings.Index(u, "::"); i > 0 && !strings.ContainsAny(u[:i], "/:@") {
		u = u[i+2:] // a remote helper: "transport::address"
	}
	var host, p string
	if scheme, _, ok := strings.Cut(u, "://"); ok && !strings.ContainsAny(scheme, "/@") {
		if strings.EqualFold(scheme, "file") {
			return "", false
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Hostname() == "" {
			return whole(u), true
		}
		host, p = parsed.Hostname(), parsed.Path
	} else {
		var ok bool
		if host, p, ok = scpLike(u); !ok {
			return "", false
		}
	}
	p = strings.Trim(path.Clean("/"+p), "/")
	p = strings.TrimSuffix(p, ".git")
	p = strings.TrimRight(p, "/")
	if p == "" {
		return strings.ToLower(host), true
	}
	return strings.ToLower(host + "/" + p), true
}

// scpLike takes apart "[user@]host:path" (and "[user@host:port]:path"),
// reporting false for what git takes as a local path: no ':' at all, a '/'
// before the first ':', or a drive letter ("C:").
func scpLike(u string) (host, p string, ok bool) {
	if strings.HasPrefix(u, "[") {
		inner, rest, found := strings.Cut(u[1:], "]:")
		if !found {
			return "", "", false
		}
		if _, h, at := strings.Cut(inner, "@"); at {
			inner = h
		}
		if strings.Count(inner, ":") == 1 { // host:port, not an IPv6 address
			inner, _, _ = strings.Cut(inner, ":")
		}
		return inner, rest, inner != ""
	}
	colon := strings.IndexByte(u, ':')
	if colon < 0 {
		return "", "", false
	}
	if slash := strings.IndexByte(u, '/'); slash >= 0 && slash < colon {
		return "", "", false
	}
	host = u[:colon]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if host == "" || len(u[:colon]) == 1 && isAlpha(u[0]) {
		return "", "", false
	}
	return host, u[colon+1:], true
}

func whole(u string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimRight(u, "/"), ".git"))
}
