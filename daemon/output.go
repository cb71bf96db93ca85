package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/runner"
)

// Agent output tail limits (GET /v1/loops/{id}/output?bytes=N).
const (
	DefaultOutputBytes = 64 << 10
	MaxOutputBytes     = 1 << 20
)

func (d *daemon) output(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "bytes"); err != nil {
		return err
	}
	n := DefaultOutputBytes
	if s := q.Get("bytes"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			return control.Invalid("bytes", "want a positive integer, got %q", s)
		}
		n = min(v, MaxOutputBytes)
	}
	id, err := loopID(r)
	if err != nil {
		return err
	}
	l, err := d.svc.Get(id)
	if err != nil {
		return err
	}
	path := agentLog(d.paths.Home, l.ID, l.Iteration)
	text, err := tail(path, n)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if path != "" {
		w.Header().Set("X-Loopr-Log", path)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(text)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(text)
	return err
}

// agentLog returns the agent.log of loop id's given iteration, or else of
// its latest iteration that has one; "" if there is none.
func agentLog(home, id string, iteration int) string {
	if iteration > 0 {
		p := filepath.Join(runner.IterationDir(home, id, iteration), "agent.log")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	dir := filepath.Dir(runner.IterationDir(home, id, 1))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	best, bestN := "", -1
	for _, e := range entries {
		k, err := strconv.Atoi(e.Name())
		if err != nil || k < 0 || !e.IsDir() || k <= bestN {
			continue
		}
		p := filepath.Join(dir, e.Name(), "agent.log")
		if _, err := os.Stat(p); err == nil {
			best, bestN = p, k
		}
	}
	return best
}

// tail returns at most the last n bytes of the file at path, starting at a
// whole UTF-8 character. A missing file (or path "") has no output yet.
func tail(path string, n int) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	// The agent could have replaced its log with a FIFO (the open would
	// block this handler) or a link to /proc/self/environ (the daemon's
	// environment would be served): only a regular file is read.
	f, err := safefile.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var nr *safefile.NotRegularError
	if errors.As(err, &nr) {
		return nil, control.Invalid("output", "%v; loopr shows only a log it wrote", err)
	}
	if err != nil {
		return nil, fmt.Errorf("agent output: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("agent output: %w", err)
	}
	off := max(0, fi.Size()-int64(n))
	buf, err := io.ReadAll(io.NewSectionReader(f, off, int64(n)))
	if err != nil {
		return nil, fmt.Errorf("agent output: %w", err)
	}
	if off > 0 {
		for k := 0; k < utf8.UTFMax-1 && len(buf) > 0 && !utf8.RuneStart(buf[0]); k++ {
			buf = buf[1:]
		}
	}
	return buf, nil
}
