package daemon_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
)

// TestAdmissionLimitIs429: a full queue refuses a create with 429 and the
// queue_full code, so clients can tell "retry later" from bad input.
func TestAdmissionLimitIs429(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Admission.MaxPending = 1
	d := startDaemon(t, newPaths(t), cfg)
	ctx := context.Background()
	req := api.CreateRequest{Type: loop.Ralph, Task: "x", RunnableAt: later()}
	if _, err := d.c.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	_, err := d.c.Create(ctx, req)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Code != api.CodeQueueFull {
		t.Fatalf("second create = %v; want 429 %s", err, api.CodeQueueFull)
	}
}
