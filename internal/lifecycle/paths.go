package lifecycle

import (
	"context"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/internal/pathcheck"
)

// CheckPaths answers POST /check-paths, the edit and commit guards'
// question, for the session's current identity: the paths another
// holder's reservation holds, as the channel says them. The request's
// tool and working directory are the hook's; the bridge judges each file
// by where its write lands, whatever the session's directory.
func (a channelAdapter) CheckPaths(ctx context.Context, req clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
	held, err := a.c.CheckPaths(ctx, req.Paths)
	if err != nil {
		return clearctl.CheckPathsAnswer{}, err
	}
	return pathcheck.Answer(held), nil
}
