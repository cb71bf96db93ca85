package daemon

import (
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

func TestPanicBecomesA500(t *testing.T) {
	t.Parallel()
	d := &daemon{log: slog.New(slog.DiscardHandler)}
	h := d.wrap(func(http.ResponseWriter, *http.Request) error { panic("boom") })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/status", nil))
	var e api.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 500 || e.Err.Code != api.CodeInternal {
		t.Errorf("panicking handler = %d %q (%v); want 500 internal JSON", rec.Code, rec.Body, err)
	}
}

func TestErrorStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"input", control.Invalid("type", "unknown"), 400, api.CodeInvalid},
		{"not found", fmt.Errorf("loop x: %w", store.ErrNotFound), 404, api.CodeNotFound},
		{"exists", fmt.Errorf("loop x: %w", store.ErrExists), 409, api.CodeConflict},
		{"transition", &loop.TransitionError{ID: "x", From: loop.Complete, To: loop.Pending}, 409, api.CodeConflict},
		{"too large", &bodyTooLarge{limit: 1 << 20, err: &http.MaxBytesError{Limit: 1 << 20}}, 413, api.CodeTooLarge},
		{"stopping", errStopping, 503, api.CodeUnavailable},
		{"disk full", fmt.Errorf("write: %w", syscall.ENOSPC), 503, api.CodeUnavailable},
		{"other", errors.New("bbolt: something broke"), 500, api.CodeInternal},
	}
	for _, tt := range tests {
		status, code := errorStatus(tt.err)
		if status != tt.status || code != tt.code {
			t.Errorf("errorStatus(%s) = %d %s, want %d %s", tt.name, status, code, tt.status, tt.code)
		}
	}
}

func TestAPIMessageUsesJSONNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{control.Invalid("--max-iterations", "must be > 0"), "max_iterations: must be > 0"},
		{fmt.Errorf("--parent: %w", fmt.Errorf("loop p: %w", store.ErrNotFound)), "parent: loop p: not found"},
		{control.Invalid("now", "bad time"), "now: bad time"},
	}
	for _, tt := range tests {
		if got := apiMessage(tt.err); got != tt.want {
			t.Errorf("apiMessage(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
