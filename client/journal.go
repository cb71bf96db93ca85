package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/loopr-dev/loopr/api"
)

// Log copies the agent output of a loop's iteration (0: the latest that
// has one) to w and returns that iteration's number. With follow it goes
// on while the agent writes, until the iteration ends or ctx does.
func (c *Client) Log(ctx context.Context, id string, iteration int, follow bool, w io.Writer) (int, error) {
	q := url.Values{}
	if iteration > 0 {
		q.Set("iteration", strconv.Itoa(iteration))
	}
	if follow {
		q.Set("follow", "1")
	}
	path := loopPath(id, "log")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return 0, c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, readAPIError(resp)
	}
	n, _ := strconv.Atoi(resp.Header.Get("X-Loopr-Iteration"))
	if _, err := io.Copy(w, resp.Body); err != nil && ctx.Err() == nil {
		return n, fmt.Errorf("log: %w", err)
	}
	return n, nil
}

// Journal calls fn with each journal event after sequence number after, up
// to until (0: the end), of loop loopID or (with "") of all loops, in order.
func (c *Client) Journal(ctx context.Context, loopID string, after, until uint64, fn func(api.JournalEntry) error) error {
	q := url.Values{}
	if loopID != "" {
		q.Set("loop", loopID)
	}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if until > 0 {
		q.Set("until", strconv.FormatUint(until, 10))
	}
	path := "/v1/journal"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readAPIError(resp)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(resp.Body, 64<<10))
	for {
		var e api.JournalEntry
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}
