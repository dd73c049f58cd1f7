//go:build !linux

package sockowner

import "errors"

// Check cannot tell off Linux: it returns errors.ErrUnsupported.
func Check(pid, port int) error { return errors.ErrUnsupported }
