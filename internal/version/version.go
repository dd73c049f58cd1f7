// Package version holds bee's one version string. Every binary (bee,
// bee-mcp, bee-hook), the MCP server info and the plugin manifest
// (.claude-plugin/plugin.json, held to it by a test) report this one value,
// so a user can name the bee they run in a bug report.
//
// A release build may override it at link time:
//
//	go build -ldflags "-X github.com/tractat-us/bee/internal/version.Version=0.2.1" ./cmd/...
package version

// Version is bee's version, without a leading "v". It is a variable only so
// that -ldflags -X can set it; nothing else changes it.
var Version = "0.2.0"
