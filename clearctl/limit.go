package clearctl

// The channel's bounds on connections (see package loopback for how they
// are kept). A local process without the token can open connections, but
// it cannot keep the hook's out: the hook's connection is accepted at
// once and authenticates within a millisecond, while connections that have
// not authenticated are dropped for newer ones and within a second.
const (
	// MaxConns caps the authenticated requests served at once. An
	// authenticated request beyond it is answered 503 at once.
	MaxConns = 16

	// MaxPending caps the connections that have not authenticated yet. A
	// connection accepted beyond it takes the place of the oldest such
	// connection that has sent nothing (else of the oldest).
	MaxPending = 128
)
