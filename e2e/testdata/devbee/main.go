// Command devbee is a throwaway stand-in for cmd/bee (post, list --json,
// show --json) used only to develop the e2e scenarios before the real CLI
// existed. The suite never uses it unless BEE_E2E_DEV_BEE is set.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/tractat-us/bee/actions/board"
)

func main() {
	ctx := context.Background()
	path, err := board.DefaultPath()
	check(err)
	b, err := board.Open(path, nil)
	check(err)
	defer b.Close()
	args := os.Args[1:]
	enc := json.NewEncoder(os.Stdout)
	switch args[0] {
	case "post":
		who, _ := board.User("dev")
		rec, err := b.Post(ctx, who, "", args[1], args[2])
		check(err)
		fmt.Println(rec.ID)
	case "list":
		page, err := b.List(ctx, "")
		check(err)
		check(enc.Encode(page))
	case "show":
		rec, err := b.Get(ctx, args[1])
		check(err)
		check(enc.Encode(rec))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "devbee:", err)
		os.Exit(1)
	}
}
