package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

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

// scheduler fetches the debug plan at path and decodes it as it arrives
// with github.com/go-json-experiment/json (encoding/json/v2), about 1.7×
// as fast as encoding/json (field names matched exactly: the daemon wrote
// them from the same struct tags). The rows are
// decoded one by one into a slice sized from the view's "waiting" count,
// which the daemon writes before them (no slice grown and copied
// row by row: a quarter of the memory).
func (c *Client) scheduler(ctx context.Context, path string) (api.SchedulerView, error) {
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
	rows := json.UnmarshalFromFunc(func(dec *jsontext.Decoder, rows *[]api.SchedRow) error {
		if dec.PeekKind() != '[' {
			return errors.ErrUnsupported // null or not an array: the default decoding
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		*rows = make([]api.SchedRow, 0, max(0, min(v.Waiting, 1<<20))) // a hint: more rows may come
		for dec.PeekKind() != ']' {
			*rows = append(*rows, api.SchedRow{})
			if err := json.UnmarshalDecode(dec, &(*rows)[len(*rows)-1], json.WithUnmarshalers(nil)); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	})
	// The daemon's encoder writes neither duplicate names nor invalid
	// UTF-8: not checking again saves a tenth of the decoding.
	body := bufio.NewReaderSize(resp.Body, 256<<10) // the decoder reads 4 KiB at a time: not a syscall each
	if err := json.UnmarshalRead(body, &v, json.WithUnmarshalers(rows),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)); err != nil {
		return api.SchedulerView{}, fmt.Errorf("decode %s response: %w", resp.Request.URL.Path, err)
	}
	return v, nil
}
