package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/workspace"
)

// reloadSettle is how long the config file must stay quiet before it is
// read: editors write in several steps (truncate + write, or write a temp
// file and rename it over).
const reloadSettle = 150 * time.Millisecond

// restartKeys are settings the daemon reads only at start: a change is
// taken into the configuration, but takes effect after a restart, and the
// reload event says so.
var restartKeys = []string{
	"concurrency.max_api_calls",           // sizes the runner's agent slots
	"rate_limit.max_concurrent_api_calls", // same
	"git.worktrees",                       // the git flow is set up at start
	"git.remote",                          // same
	"worker",                              // the worker registers at start
	"api",                                 // the TCP listener and its token are opened at start
	"store",                               // the store is opened at start
}

func needsRestart(key string) bool {
	return slices.ContainsFunc(restartKeys, func(k string) bool {
		return key == k || strings.HasPrefix(key, k+".")
	})
}

// configPath is the file the daemon watches: the one in use, or, when the
// workspace has none yet, the loopr.yml it would have.
func (d *daemon) configPath() string {
	if d.paths.Config != "" {
		return d.paths.Config
	}
	if d.paths.Workspace == "" {
		return ""
	}
	return filepath.Join(d.paths.Workspace, workspace.ConfigName)
}

// watchConfig reloads loopr.yml when it changes, until ctx ends. It
// watches the file's directory, not the file, so the rename-over-the-old-
// file that editors and config tools do is seen like a write in place.
//
// SIGHUP (the daemon convention; also what a closed terminal or ssh
// session sends a foreground daemon) reloads the file at once. Run
// catches the signal from its start, so it never ends the daemon.
func (d *daemon) watchConfig(ctx context.Context, hup <-chan os.Signal) {
	path := d.configPath()
	var last []byte
	if path == "" {
		d.reloadOnHUP(ctx, hup, path, &last)
		return
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		d.log.Warn("config watch off: reload with SIGHUP or a restart instead", "err", err)
		d.reloadOnHUP(ctx, hup, path, &last)
		return
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(path)); err != nil {
		d.log.Warn("config watch off: reload with SIGHUP or a restart instead", "dir", filepath.Dir(path), "err", err)
		d.reloadOnHUP(ctx, hup, path, &last)
		return
	}
	// The file may have changed between the CLI loading it and now.
	d.reload(path, &last)

	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	name := filepath.Base(path)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if filepath.Base(ev.Name) == name {
				settle.Reset(reloadSettle)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			d.log.Warn("config watch", "err", err) // e.g. queue overflow: re-read to be sure
			settle.Reset(reloadSettle)
		case <-settle.C:
			d.reload(path, &last)
		case <-hup:
			d.log.Info("SIGHUP: reloading the configuration", "file", path)
			d.reload(path, &last)
		}
	}
}

// reloadOnHUP serves SIGHUP alone, when the file cannot be watched.
func (d *daemon) reloadOnHUP(ctx context.Context, hup <-chan os.Signal, path string, last *[]byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if path == "" {
				d.log.Info("SIGHUP: no loopr.yml to reload; the daemon goes on")
				continue
			}
			d.log.Info("SIGHUP: reloading the configuration", "file", path)
			d.reload(path, last)
		}
	}
}

// reload reads path and, when its content changed since *last, applies it:
// a valid file replaces the configuration in force and a config event lists
// what changed; an invalid one is refused with its file:line:key error, in
// the log and a config event, and the old configuration stays.
func (d *daemon) reload(path string, last *[]byte) {
	// config.ReadFile refuses a FIFO, a device or an oversize file rather
	// than blocking this goroutine or filling the memory.
	data, err := config.ReadFile(path)
	var ce *config.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if *last != nil {
			d.log.Warn("config file removed: the configuration in force stays until it is back", "file", path)
		}
		*last = nil
		return
	case errors.As(err, &ce):
		*last = nil // whatever comes next is news
		d.metrics.reload("refused")
		d.log.Error("config reload refused: the previous configuration stays in force", "err", err)
		d.journal(loop.EventConfig, "config reload refused: "+err.Error()+"; the previous configuration stays in force")
		return
	case err != nil:
		d.log.Warn("config reload: read", "file", path, "err", err)
		return
	}
	if *last != nil && bytes.Equal(data, *last) && d.svc.Trust() == nil {
		return // unchanged; with something waiting for trust, `loopr trust` sent SIGHUP: check again
	}
	first := *last == nil
	*last = data
	cfg, err := config.Parse(data, path)
	if err != nil {
		d.metrics.reload("refused")
		d.log.Error("config reload refused: the previous configuration stays in force", "err", err)
		d.journal(loop.EventConfig, "config reload refused: "+err.Error()+"; the previous configuration stays in force")
		return
	}
	if !d.gateReload(cfg) {
		return // held until `loopr trust` (trust.go)
	}
	changes := config.Diff(d.config(), cfg)
	if len(changes) == 0 {
		if !first {
			d.log.Info("config file changed; no setting differs", "file", path)
		}
		return
	}
	var parts []string
	for _, c := range changes {
		s := c.String()
		if needsRestart(c.Key) {
			s += " (needs a restart)"
		}
		parts = append(parts, s)
	}
	d.cfg.Store(cfg)
	d.learnSecrets()
	d.metrics.reload("applied")
	msg := "config reloaded from " + filepath.Base(path) + ": " + strings.Join(parts, "; ")
	d.log.Info("config reloaded", "file", path, "changes", strings.Join(parts, "; "))
	d.journal(loop.EventConfig, msg)
	d.journalPreflight()
	d.mgr.Wake()
}

// journalPreflight journals the preflight problems of the configuration in
// force, if any: loops of those types wait (reason preflight).
func (d *daemon) journalPreflight() {
	for _, p := range d.svc.Preflight() {
		msg := fmt.Sprintf("preflight: %s: %s; %s (loops of %s wait)", p.Key, p.What, p.Fix, strings.Join(p.Types, ", "))
		d.log.Warn(msg)
		d.journal(loop.EventConfig, msg)
	}
}
