package pgboard

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/pgtest"
)

// requireCauseFirst checks that err's text says want before it names the
// board (whose URL holds a '?' a reader would stop at), and says each of
// also.
func requireCauseFirst(t *testing.T, err error, want string, also ...string) {
	t.Helper()
	msg := err.Error()
	t.Log(msg)
	i := strings.Index(msg, want)
	require.GreaterOrEqual(t, i, 0, "says %q", want)
	if j := strings.Index(msg, "postgres://"); j >= 0 {
		require.Less(t, i, j, "the cause before the board's URL")
	}
	require.Less(t, i, strings.IndexAny(msg+";", ";?"), "the cause in the first clause")
	for _, a := range also {
		require.Contains(t, msg, a)
	}
	require.NotContains(t, msg, "PostgreSQL server unreachable", "the sentinel's words are not said again")
	require.NotContains(t, msg, "failed to connect to", "pgx's own prefix is left out")
}

// The README's URL (sslmode=verify-full) against a server without TLS
// says that the server does not offer TLS, which the URL asks for, and
// what to do, at once: not that it cannot be reached.
func TestOpen_TLSRefused(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	if !c.Owned() {
		t.Skip("needs a cluster the test started, which has no TLS") // an external server's TLS is unknown
	}
	url := strings.Replace(c.URL(c.NewDB(t)), "sslmode=disable", "sslmode=verify-full", 1)
	start := time.Now()
	_, err := Open(url, nil)
	require.ErrorIs(t, err, ErrTLS)
	require.NotErrorIs(t, err, ErrUnreachable)
	requireCauseFirst(t, err, "does not offer TLS", "sslmode=verify-full", "sslmode=disable", "ssl on")
	require.Less(t, time.Since(start), 5*time.Second, "no wait for the connect timeout")
}

// A server whose TLS certificate fails the check sslmode asks for is
// named as such: an unknown authority, or a certificate for another host.
func TestOpen_TLSCertificateFails(t *testing.T) {
	t.Parallel()
	ca, addr := fakeTLSServer(t) // a certificate for 127.0.0.1
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca, 0o600))

	_, err := Open("postgres://bee:pw-s3cret@"+addr+"/bee?sslmode=verify-full", &Options{ConnectTimeout: 5 * time.Second})
	require.ErrorIs(t, err, ErrTLS)
	requireCauseFirst(t, err, "signed by an authority this machine does not trust", "sslrootcert=FILE")
	require.NotContains(t, err.Error(), "pw-s3cret")

	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	_, err = Open("postgres://bee@localhost:"+port+"/bee?sslmode=verify-full&sslrootcert="+caFile, &Options{ConnectTimeout: 5 * time.Second})
	require.ErrorIs(t, err, ErrTLS)
	requireCauseFirst(t, err, `is not for host "localhost"`, "sslmode=verify-ca")
}

// Nobody listening is said first, with the address; the driver's words
// are not repeated after bee's.
func TestOpen_RefusedSaidOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = Open("postgres://bee@"+addr+"/bee?sslmode=disable", &Options{ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, ErrUnreachable)
	requireCauseFirst(t, err, "nothing listens at "+addr+" (connection refused)", "is the PostgreSQL server running")
	require.Equal(t, 1, strings.Count(strings.ToLower(err.Error()), "postgresql server"), "said once")
}

// fakeTLSServer listens on 127.0.0.1 as a PostgreSQL server that offers
// TLS with a certificate for 127.0.0.1 only, signed by a CA of its own,
// and returns the CA's certificate (PEM) and the address. It answers
// nothing after the handshake.
func fakeTLSServer(t *testing.T) (caPEM []byte, addr string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bee test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				var req [8]byte // SSLRequest
				if _, err := io.ReadFull(conn, req[:]); err != nil {
					return
				}
				if _, err := conn.Write([]byte{'S'}); err != nil {
					return
				}
				tc := tls.Server(conn, cfg)
				if tc.Handshake() == nil {
					_, _ = io.Copy(io.Discard, tc)
				}
			}()
		}
	}()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), l.Addr().String()
}
