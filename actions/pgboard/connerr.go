package pgboard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// A reachError is an error said for a person: the cause first, once,
// then what to do (a failure to reach the server, say). It wraps its
// sentinel (ErrUnreachable, ErrTLS, ErrNoBoard) and the driver's error,
// when there is one, for errors.Is and errors.As, without repeating their
// words.
type reachError struct {
	msg      string
	sentinel error
	cause    error // nil when none
}

func (e *reachError) Error() string { return e.msg }
func (e *reachError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// A connTarget is what an error about a connection names: the server's
// address, the URL's sslmode, and the bound it was given.
type connTarget struct {
	where   string        // "127.0.0.1:5432", or "the unix socket in /run/postgresql"
	host    string        // the host as the URL gives it
	sslmode string        // the URL's sslmode, "" when it has none
	within  time.Duration // how long the connection was given
	board   string        // the board's location, said last
}

// sslmodeOf returns the sslmode a postgres:// URL asks for, "" when none.
func sslmodeOf(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		return ""
	}
	return u.Query().Get("sslmode")
}

// connectErr says why a connection to c failed, when the driver's err is
// one a person can act on without reading it: the server refused TLS, its
// certificate failed, nobody listens, the host is unknown or unreachable,
// or it did not answer in time. Anything else is said as the driver says
// it, after what bee tried. The result wraps ErrTLS for a TLS failure,
// else ErrUnreachable, and err.
func connectErr(err error, c connTarget) error {
	opening := " (opening board " + c.board + ")"
	if msg, ok := tlsCause(err, c); ok {
		return &reachError{msg: msg + opening, sentinel: ErrTLS, cause: err}
	}
	return &reachError{msg: reachCause(err, c) + opening, sentinel: ErrUnreachable, cause: err}
}

// tlsCause says what went wrong with TLS, when that is what failed.
func tlsCause(err error, c connTarget) (string, bool) {
	mode := "sslmode=" + c.sslmode
	if c.sslmode == "" {
		mode = "its sslmode"
	}
	var (
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
		record    tls.RecordHeaderError
	)
	switch {
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return fmt.Sprintf("the PostgreSQL server at %s does not offer TLS, which the URL asks for (%s); turn ssl on in its postgresql.conf, or, only on a network you trust, connect without TLS (sslmode=disable)",
			c.where, mode), true
	case errors.As(err, &authority):
		return fmt.Sprintf("the TLS certificate of the PostgreSQL server at %s is signed by an authority this machine does not trust; name that authority's certificate in the URL (sslrootcert=FILE), or encrypt without checking the certificate (sslmode=require)",
			c.where), true
	case errors.As(err, &hostname):
		return fmt.Sprintf("the TLS certificate of the PostgreSQL server at %s is not for host %q (%s checks the host name); connect by a name the certificate holds, or check only its authority (sslmode=verify-ca)",
			c.where, c.host, mode), true
	case errors.As(err, &invalid):
		return fmt.Sprintf("the TLS certificate of the PostgreSQL server at %s is not valid (%v); renew the server's certificate", c.where, invalid), true
	case errors.As(err, &verify):
		return fmt.Sprintf("the TLS certificate of the PostgreSQL server at %s failed verification (%v); fix the server's certificate, or the URL's sslrootcert", c.where, verify.Err), true
	case errors.As(err, &alert), errors.As(err, &record):
		return fmt.Sprintf("TLS with the PostgreSQL server at %s failed (%v); check its ssl settings and the URL's (%s)", c.where, err, mode), true
	}
	return "", false
}

// reachCause says why the server could not be reached.
func reachCause(err error, c connTarget) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		return fmt.Sprintf("the host %q in the URL cannot be found (%s); check the host name", c.host, dns.Err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		return fmt.Sprintf("nothing listens at %s (connection refused); is the PostgreSQL server running there, and are the host and port in the URL right?", c.where)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Sprintf("there is no route to %s (%v); check the network, and the host in the URL", c.where, errors.Unwrap(err))
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("the PostgreSQL server at %s did not answer within %v; is it running and reachable (not stopped, not behind a firewall), and are the host and port in the URL right?", c.where, roundWithin(c.within))
	}
	return fmt.Sprintf("cannot reach the PostgreSQL server at %s (%s); is it running, and are the host and port in the URL right?", c.where, driverDetail(err))
}

// driverDetail is the driver's own words for err without what bee says
// already: the user and database it tried, and the address.
func driverDetail(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "): "); i >= 0 && strings.HasPrefix(msg, "failed to connect to ") {
		msg = msg[i+len("): "):]
	}
	for _, p := range []string{"dial error: ", "tls error: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// lostDetail is what a parenthesis adds to "the server has not answered"
// about err: nothing when err says only that (a timeout), else the
// driver's words.
func lostDetail(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	return " (" + driverDetail(err) + ")"
}

// roundWithin is a bound as an error says it: to a tenth of a second, or a
// millisecond below one second.
func roundWithin(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
