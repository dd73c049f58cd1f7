package bridge

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite schemas.json from the tools' types")

// TestToolSchemas_UpToDate holds schemas.json, which the bridge serves, to
// what the tools' Go types say (see schema.go).
func TestToolSchemas_UpToDate(t *testing.T) {
	want, err := derivedSchemas()
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile("schemas.json", want, 0o644))
		return
	}
	if !bytes.Equal(schemasJSON, want) {
		t.Fatalf("schemas.json differs from the schemas the tools' types give; rewrite it with\n\t%s", regenerate)
	}
}
