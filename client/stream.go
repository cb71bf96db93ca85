package client

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/loopr-dev/loopr/api"
)

// ListJSON copies the daemon's answer to GET /v1/loops — one JSON array
// of loop records, in id order — to w as it arrives, without decoding it:
// `loopr list --json` of 100k loops streams through in a fraction of the
// time a decode and re-encode would take. A cut-off body is the caller's
// to detect (the array does not close).
func (c *Client) ListJSON(ctx context.Context, req api.ListRequest, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, listPath(req), nil, "")
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readAPIError(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	return nil
}
