package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Lifecycle hooks (`hooks:`, loops.<type>.hooks, types.<name>.hooks) and
// worktree.copy. A hooks map is keyed by hook name (HookNames); each entry
// starts from DefaultHook. A type's map that names any hook replaces the
// top-level map for that type (HooksFor): `{before_run: {run: []}}` turns
// every top-level hook off for it. Package hooks runs them.

// Hook is one entry of `hooks:` (or loops.<type>.hooks): shell commands
// (sh -c, one after the other, each in its own process group) run at one
// point of a loop's life, each at most TimeoutSecs; OnError says what a
// failing one does.
type Hook struct {
	Run         []string `yaml:"run"`
	TimeoutSecs int      `yaml:"timeout_secs"`
	OnError     string   `yaml:"on_error"`
}

// The names of the hooks: where in a loop's life each runs.
const (
	AfterCreate  = "after_create"  // a new worktree was made (after worktree.copy)
	BeforeRun    = "before_run"    // before each iteration's agent
	AfterRun     = "after_run"     // after each iteration (agent, validation, commit)
	BeforeMerge  = "before_merge"  // in the merge worktree, on the merged result, before the plan branch moves
	AfterMerge   = "after_merge"   // a task landed on its plan branch
	BeforeRemove = "before_remove" // a loop's worktree is about to be removed
)

// HookNames lists every hook, in the order of a loop's life.
var HookNames = []string{AfterCreate, BeforeRun, AfterRun, BeforeMerge, AfterMerge, BeforeRemove}

// The values of a hook's on_error.
const (
	OnErrorBlock   = "block"   // the step fails (see docs/configuration.md for each hook)
	OnErrorWarn    = "warn"    // journaled; the step goes on
	OnErrorSuspend = "suspend" // the loop waits in needs_human (reason hook)
)

// DefaultHookTimeoutSecs is a hook's timeout_secs unless it sets one.
const DefaultHookTimeoutSecs = 120

// DefaultHook returns the settings a hook starts from: no command,
// DefaultHookTimeoutSecs, on_error block.
func DefaultHook() Hook { return Hook{TimeoutSecs: DefaultHookTimeoutSecs, OnError: OnErrorBlock} }

// Timeout returns TimeoutSecs as a duration.
func (h Hook) Timeout() time.Duration { return time.Duration(h.TimeoutSecs) * time.Second }

// HooksFor returns the hooks of type t: loops.<t>.hooks (or types.<t>.hooks)
// when it names any, else the top level's. The map is shared: do not change it.
func (c *Config) HooksFor(t string) map[string]Hook {
	var own map[string]Hook
	if builtin(t) {
		own = c.Loops[t].Hooks
	} else if u, ok := c.UserTypes[t]; ok {
		own = u.Hooks
	}
	if len(own) > 0 {
		return own
	}
	return c.Hooks
}

// Worktree is the `worktree:` section.
type Worktree struct {
	// Copy lists files of the workspace (relative paths or globs, usually
	// gitignored ones such as .env) copied into every new worktree.
	Copy []string `yaml:"copy"`
}

// ShellCommand is one shell command of loopr.yml, by its dotted key.
type ShellCommand struct {
	Key     string // hooks.before_run.run[0]
	Command string
}

// HookCommands lists every command of every hook, top level first, then
// loops by built-in type, then user types by name; hooks by name.
func (c *Config) HookCommands() []ShellCommand {
	var out []ShellCommand
	add := func(prefix string, hs map[string]Hook) {
		for _, name := range slices.Sorted(maps.Keys(hs)) {
			for i, cmd := range hs[name].Run {
				out = append(out, ShellCommand{Key: fmt.Sprintf("%s.run[%d]", joinKey(prefix, name), i), Command: cmd})
			}
		}
	}
	add("hooks", c.Hooks)
	for _, t := range loop.BuiltinTypes {
		add("loops."+t+".hooks", c.Loops[t].Hooks)
	}
	for _, t := range slices.Sorted(maps.Keys(c.UserTypes)) {
		add(joinKey("types", t)+".hooks", c.UserTypes[t].Hooks)
	}
	return out
}

// hooks checks a hooks map: known names, commands that are not empty, a
// positive timeout and a known on_error.
func (v *checker) hooks(key string, hs map[string]Hook) {
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		hk := joinKey(key, name)
		if !slices.Contains(HookNames, name) {
			v.fail(hk, "unknown hook %q (known: %s)", name, strings.Join(HookNames, ", "))
		}
		h := hs[name]
		for i, cmd := range h.Run {
			if strings.TrimSpace(cmd) == "" {
				v.fail(fmt.Sprintf("%s.run[%d]", hk, i), "must not be empty")
			}
		}
		v.positive(hk+".timeout_secs", h.TimeoutSecs)
		switch h.OnError {
		case OnErrorBlock, OnErrorWarn, OnErrorSuspend:
		default:
			v.fail(hk+".on_error", "unknown value %q (want block, warn or suspend)", h.OnError)
		}
	}
}

// copies checks worktree.copy: paths (or globs) inside the workspace.
func (v *checker) copies(list []string) {
	for i, p := range list {
		key := fmt.Sprintf("worktree.copy[%d]", i)
		clean := filepath.Clean(p)
		switch {
		case strings.TrimSpace(p) == "":
			v.fail(key, "must not be empty")
		case filepath.IsAbs(p):
			v.fail(key, "%q: must be relative to the workspace", p)
		case clean == "." || clean == ".." || strings.HasPrefix(clean, "../"):
			v.fail(key, "%q: must name files inside the workspace", p)
		}
		if _, err := filepath.Match(p, ""); err != nil {
			v.fail(key, "%q: bad glob: %v", p, err)
		}
	}
}

// merge checks the merge queue's settings.
func (v *checker) merge(m Merge) {
	for i, cmd := range m.Validate {
		if strings.TrimSpace(cmd) == "" {
			v.fail(fmt.Sprintf("merge.validate[%d]", i), "must not be empty")
		}
	}
	v.positive("merge.batch", m.Batch)
	if m.Batch > MaxMergeBatch {
		v.fail("merge.batch", "must be <= %d", MaxMergeBatch)
	}
}
