package clearctl_test

import (
	"context"
	"fmt"

	"github.com/tractat-us/bee/clearctl"
)

// The bridge serves the channel; the hook, which has read the port and the
// token from the bridge's run file, calls it.
func Example() {
	// In the bridge.
	srv := clearctl.New("token-from-the-run-file", clearctl.RetirerFunc(
		func(ctx context.Context, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
			// Mint a new identity, then report the old one's departure.
			return clearctl.RetireResponse{Retired: "agent:demo#0491068b", Current: "agent:demo#e08394c9"}, nil
		}), nil)
	if err := srv.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	// In the hook.
	resp, err := clearctl.Retire(context.Background(), srv.Port(), "token-from-the-run-file",
		clearctl.RetireRequest{SessionID: "the-new-session"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("retired", resp.Retired, "now", resp.Current)
	// Output: retired agent:demo#0491068b now agent:demo#e08394c9
}
