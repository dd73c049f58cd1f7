package pgboard

import "fmt"

func runRole(role string) error { return fmt.Errorf("unknown role %q", role) }
