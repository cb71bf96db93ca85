package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestLogJournalAndPrefixRoutes: GET /v1/loops/{id}/log serves an
// iteration's agent output (whole, or followed to the iteration's end),
// GET /v1/journal the journal with titles, GET /v1/loops?prefix= the loops
// an id prefix names; bad parameters are 400s that name them.
func TestLogJournalAndPrefixRoutes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, newPaths(t), testConfig("sh", "-c", `cat >/dev/null; echo "out of $LOOPR_LOOP_ID"; sleep 0.3; echo "end of iteration $LOOPR_ITERATION"`))
	ctx := context.Background()
	waiting := create(t, d.c, "Waits", false)

	// A loop that never ran: no output, iteration 0, not an error.
	var buf bytes.Buffer
	if n, err := d.c.Log(ctx, waiting.ID, 0, false, &buf); err != nil || n != 0 || buf.Len() != 0 {
		t.Errorf("Log(never ran) = %d, %q, %v", n, buf.String(), err)
	}
	// Followed from before it runs: waited for, then streamed to the end
	// of the iteration.
	runs := create(t, d.c, "Runs", true)
	buf.Reset()
	lctx, cancel := context.WithTimeout(ctx, testslack.Scale(20*time.Second))
	n, err := d.c.Log(lctx, runs.ID, 0, true, &buf)
	cancel()
	if err != nil || n != 1 || buf.String() != "out of "+runs.ID+"\nend of iteration 1\n" {
		t.Errorf("Log(follow) = %d, %q, %v; want iteration 1's whole output", n, buf.String(), err)
	}
	buf.Reset()
	if n, err := d.c.Log(ctx, runs.ID, 1, false, &buf); err != nil || n != 1 || !strings.HasSuffix(buf.String(), "end of iteration 1\n") {
		t.Errorf("Log(iteration 1) = %d, %q, %v", n, buf.String(), err)
	}

	var entries []api.JournalEntry
	err = d.c.Journal(ctx, runs.ID, 0, 0, func(e api.JournalEntry) error { entries = append(entries, e); return nil })
	if err != nil || len(entries) < 3 || entries[0].Kind != loop.EventCreated || entries[0].Title != "Runs" || entries[0].Type != loop.Ralph {
		t.Fatalf("Journal(%s) = %+v, %v", runs.ID, entries, err)
	}
	for _, e := range entries {
		if e.Loop != runs.ID {
			t.Errorf("Journal(%s) has an event of %s", runs.ID, e.Loop)
		}
	}
	var all []api.JournalEntry
	last := entries[len(entries)-1].Seq
	err = d.c.Journal(ctx, "", entries[0].Seq, last, func(e api.JournalEntry) error { all = append(all, e); return nil })
	if err != nil || len(all) == 0 || all[0].Seq <= entries[0].Seq || all[len(all)-1].Seq != last {
		t.Errorf("Journal(after %d, until %d) = %+v, %v", entries[0].Seq, last, all, err)
	}

	got, err := d.c.List(ctx, api.ListRequest{Prefix: strings.ToLower(runs.ID[:20])})
	if err != nil || len(got) != 1 || got[0].ID != runs.ID {
		t.Errorf("List(prefix) = %v, %v", got, err)
	}

	hc := socketHTTP(d.paths.Socket())
	t.Cleanup(hc.CloseIdleConnections)
	for path, want := range map[string]string{
		"/v1/loops/" + runs.ID + "/log?iteration=0":  "iteration: want a positive integer",
		"/v1/loops/" + runs.ID + "/log?iteration=9":  "there is no iteration 9",
		"/v1/loops/" + runs.ID + "/log?follow=maybe": "follow: want 1 or 0",
		"/v1/loops/" + runs.ID + "/log?tail=1":       "tail: unknown query parameter",
		"/v1/journal?after=x":                        "after: want a sequence number",
		"/v1/journal?loop=a.b":                       "loop: \"a.b\" is not a loop id",
		"/v1/loops?prefix=01&colour=red":             "colour: unknown query parameter",
	} {
		resp, err := hc.Get("http://loopr" + path)
		if err != nil {
			t.Fatal(err)
		}
		var body api.Error
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.Err.Message, want) {
			t.Errorf("GET %s = %d %q, want a 400 with %q", path, resp.StatusCode, body.Err.Message, want)
		}
	}
	err = d.c.Journal(ctx, "NOPE", 0, 0, func(api.JournalEntry) error { return nil })
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("Journal(NOPE) = %v, want a 404", err)
	}
}
