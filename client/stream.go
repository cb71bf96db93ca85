package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/loopr-dev/loopr/api"
)

// The two large answers: every loop record (GET /v1/loops, ~800 bytes a
// loop) and the debug plan (GET /v1/scheduler, ~300 bytes a waiting loop),
// 94 MB and 32 MB with 100k loops.

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

// SchedulerRows fetches the debug plan at now (zero: the daemon's now) and
// calls row with each row as it arrives, in order: v holds the view's
// other fields (Rows empty), r is reused from row to row (copy what you
// keep). `loopr debug scheduler` builds its table this way while the rest
// of the plan is still on its way, without holding 100k rows. It returns
// the view without its rows (Rows empty, or nil when the plan's rows were
// null); an error from row stops it and is returned as it is.
//
// The plan is decoded by github.com/go-json-experiment/json
// (encoding/json/v2), about 1.7× as fast as encoding/json, field names
// matched exactly (the daemon wrote them from the same struct tags).
func (c *Client) SchedulerRows(ctx context.Context, now time.Time, row func(v *api.SchedulerView, r *api.SchedRow) error) (api.SchedulerView, error) {
	path := "/v1/scheduler" + nowQuery(now)
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return api.SchedulerView{}, c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return api.SchedulerView{}, readAPIError(resp)
	}
	var v api.SchedulerView
	var stopped error // row's error, returned as it is
	rows := json.UnmarshalFromFunc(func(dec *jsontext.Decoder, rows *[]api.SchedRow) error {
		if dec.PeekKind() != '[' {
			return errors.ErrUnsupported // null or not an array: the default decoding
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		*rows = []api.SchedRow{} // an array, not null: the view's Rows are empty, not nil
		var r api.SchedRow
		for dec.PeekKind() != ']' {
			r = api.SchedRow{}
			if err := json.UnmarshalDecode(dec, &r, json.WithUnmarshalers(nil)); err != nil {
				return err
			}
			if stopped = row(&v, &r); stopped != nil {
				return stopped
			}
		}
		_, err := dec.ReadToken()
		return err
	})
	// The daemon's encoder writes neither duplicate names nor invalid
	// UTF-8: not checking again saves a tenth of the decoding. The decoder
	// reads 4 KiB at a time: from a buffer, not a syscall each.
	body := bufio.NewReaderSize(resp.Body, 256<<10)
	err = json.UnmarshalRead(body, &v, json.WithUnmarshalers(rows),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	switch {
	case stopped != nil:
		return api.SchedulerView{}, stopped
	case err != nil:
		return api.SchedulerView{}, fmt.Errorf("decode %s response: %w", resp.Request.URL.Path, err)
	}
	return v, nil
}
