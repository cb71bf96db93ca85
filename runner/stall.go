package runner

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// maxWatchedDirs bounds the directories of a workdir the stall watch
// follows with inotify: a huge worktree (a monorepo, a node_modules) must
// not cost thousands of watches per running agent. Past the bound, only the
// agent's output and changes in the directories already watched count.
const maxWatchedDirs = 1024

// activity is the time of the last sign of life of an agent: a byte of
// output or a file change in its workdir.
type activity struct{ last atomic.Int64 }

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

func (a *activity) idle() time.Duration { return time.Since(time.Unix(0, a.last.Load())) }

// activeWriter notes every write as activity.
type activeWriter struct {
	w io.Writer
	a *activity
}

func (w activeWriter) Write(p []byte) (int, error) {
	w.a.touch()
	return w.w.Write(p)
}

// watchStall returns a channel closed once a has been idle for d. File
// changes under dir count as activity (directories named in skip, and .git,
// are not watched). It stops when ctx ends.
func watchStall(ctx context.Context, dir string, skip []string, d time.Duration, a *activity) <-chan struct{} {
	stalled := make(chan struct{})
	w, err := fsnotify.NewWatcher()
	if err != nil {
		w = nil // output alone then counts
	}
	watched := 0
	add := func(root string) {
		if w == nil {
			return
		}
		_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			if e.Name() == ".git" || skipped(p, skip) {
				return filepath.SkipDir
			}
			if watched >= maxWatchedDirs {
				return filepath.SkipAll
			}
			if w.Add(p) == nil {
				watched++
			}
			return nil
		})
	}
	add(dir)
	tick := min(max(d/10, 50*time.Millisecond), 5*time.Second)
	go func() {
		var events <-chan fsnotify.Event
		var errs <-chan error
		if w != nil {
			defer w.Close()
			events, errs = w.Events, w.Errors
		}
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				a.touch()
				if ev.Has(fsnotify.Create) {
					add(ev.Name) // a new directory: follow it too (WalkDir ignores files)
				}
			case <-errs:
			case <-t.C:
				if a.idle() >= d {
					close(stalled)
					return
				}
			}
		}
	}()
	return stalled
}

func skipped(p string, skip []string) bool {
	for _, s := range skip {
		if s != "" && (p == s || strings.HasPrefix(p, s+string(filepath.Separator))) {
			return true
		}
	}
	return false
}

// shortDuration reads "10m", "90s" → "1m30s", "2h": a duration as a person
// writes it.
func shortDuration(d time.Duration) string {
	if d < time.Second {
		return d.String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
