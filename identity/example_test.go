package identity_test

import (
	"fmt"

	"github.com/tractat-us/bee/identity"
)

// The agent name a session gets when none is set comes from its working
// directory. README.md quotes these examples.
func ExampleNameFromDir() {
	for _, dir := range []string{
		"/home/alice/bee",
		"/home/alice/My Project",
		"/home/alice/café",
		"/home/alice/.dotfiles",
		"/home/alice/日本語",
		"/",
	} {
		fmt.Printf("%s -> %s\n", dir, identity.NameFromDir(dir))
	}
	// Output:
	// /home/alice/bee -> bee
	// /home/alice/My Project -> My-Project
	// /home/alice/café -> caf-
	// /home/alice/.dotfiles -> dotfiles
	// /home/alice/日本語 -> agent
	// / -> agent
}
