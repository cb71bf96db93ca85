package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
)

// TestParseHooks: hooks start from timeout_secs 120 and on_error block;
// loops.<type>.hooks replaces the top level's for that type only;
// worktree.copy is kept as written.
func TestParseHooks(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`hooks:
  before_run: {run: ["make db"], on_error: warn}
  after_create: {run: ["npm ci", "cp x y"], timeout_secs: 600}
loops:
  ralph:
    hooks:
      before_run: {run: ["make ralph-db"], on_error: suspend}
worktree:
  copy: [".env", "config/*.yml"]
`), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]config.Hook{
		config.BeforeRun:   {Run: []string{"make db"}, TimeoutSecs: 120, OnError: config.OnErrorWarn},
		config.AfterCreate: {Run: []string{"npm ci", "cp x y"}, TimeoutSecs: 600, OnError: config.OnErrorBlock},
	}
	if diff := cmp.Diff(top, c.HooksFor(loop.Spec)); diff != "" {
		t.Errorf("HooksFor(spec) mismatch (-want +got):\n%s", diff)
	}
	ralph := map[string]config.Hook{config.BeforeRun: {Run: []string{"make ralph-db"}, TimeoutSecs: 120, OnError: config.OnErrorSuspend}}
	if diff := cmp.Diff(ralph, c.HooksFor(loop.Ralph)); diff != "" {
		t.Errorf("HooksFor(ralph) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{".env", "config/*.yml"}, c.Worktree.Copy); diff != "" {
		t.Errorf("worktree.copy mismatch (-want +got):\n%s", diff)
	}
	want := []config.ShellCommand{
		{Key: "hooks.after_create.run[0]", Command: "npm ci"}, {Key: "hooks.after_create.run[1]", Command: "cp x y"},
		{Key: "hooks.before_run.run[0]", Command: "make db"}, {Key: "loops.ralph.hooks.before_run.run[0]", Command: "make ralph-db"},
	}
	if diff := cmp.Diff(want, c.HookCommands()); diff != "" {
		t.Errorf("HookCommands() mismatch (-want +got):\n%s", diff)
	}
	lines := config.KeyLines([]byte("hooks:\n  before_run:\n    run:\n      - make db\n      - 'if'\n"))
	if got := lines["hooks.before_run.run[1]"]; got != 5 {
		t.Errorf("KeyLines: hooks.before_run.run[1] at line %d; want 5", got)
	}
}

func TestHookErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"unknown hook", "hooks:\n  before_build: {run: [make]}\n",
			`loopr.yml:2: hooks.before_build: unknown hook "before_build" (known: after_create, before_run, after_run, before_merge, after_merge, before_remove)`},
		{"bad on_error", "hooks:\n  before_run:\n    run: [make]\n    on_error: ignore\n",
			`loopr.yml:4: hooks.before_run.on_error: unknown value "ignore" (want block, warn or suspend)`},
		{"zero timeout", "loops:\n  ralph:\n    hooks:\n      after_run: {run: [make], timeout_secs: 0}\n",
			"loopr.yml:4: loops.ralph.hooks.after_run.timeout_secs: must be > 0"},
		{"empty command", "hooks:\n  after_merge:\n    run:\n      - make\n      - ' '\n",
			"loopr.yml:5: hooks.after_merge.run[1]: must not be empty"},
		{"run is not a list", "hooks:\n  before_run: {run: make}\n",
			`loopr.yml:2: hooks.before_run.run: must be a list of strings, got "make"`},
		{"unknown hook key", "hooks:\n  before_run: {command: [make]}\n",
			"loopr.yml:2: hooks.before_run.command: unknown key"},
		{"user type", "types:\n  review:\n    hooks:\n      before_run: {run: [make], on_error: stop}\n",
			`loopr.yml:4: types.review.hooks.before_run.on_error: unknown value "stop" (want block, warn or suspend)`},
		{"copy absolute", "worktree:\n  copy: [/etc/passwd]\n", `loopr.yml:2: worktree.copy[0]: "/etc/passwd": must be relative to the workspace`},
		{"copy outside", "worktree:\n  copy:\n    - .env\n    - ../secrets/.env\n", `loopr.yml:4: worktree.copy[1]: "../secrets/.env": must name files inside the workspace`},
		{"copy bad glob", "worktree:\n  copy: ['config/[a-']\n", `loopr.yml:2: worktree.copy[0]: "config/[a-": bad glob: syntax error in pattern`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tt.yaml), "loopr.yml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() error = %v\nwant %s", err, tt.want)
			}
		})
	}
}
