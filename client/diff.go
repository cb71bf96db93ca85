package client

import (
	"context"
	"net/http"

	"github.com/loopr-dev/loopr/api"
)

// Diff returns what loop id's work changes (`loopr diff`).
func (c *Client) Diff(ctx context.Context, id string) (api.Diff, error) {
	var out api.Diff
	err := c.call(ctx, http.MethodGet, loopPath(id, "diff"), nil, &out)
	return out, err
}
