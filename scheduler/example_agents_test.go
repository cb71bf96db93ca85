package scheduler_test

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

// A limited agent profile holds back only its own loops, and a loop whose
// profile names a free fallback runs on it.
func ExampleAgents_Pick() {
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	agents := scheduler.Agents{
		Default:  "claude",
		ByType:   map[string]string{loop.Plan: "opus"},
		Fallback: map[string][]string{"claude": {"codex"}, "opus": nil, "codex": nil},
	}
	limits := map[string]ratelimit.State{
		"claude": {Hits: 1, BackoffUntil: now.Add(5 * time.Hour)}, // a session limit
		"opus":   {Hits: 1, BackoffUntil: now.Add(time.Hour)},
	}
	for _, l := range []loop.Loop{{Type: loop.Ralph}, {Type: loop.Plan}, {Type: loop.Plan, Agent: "codex"}} {
		p, ok := agents.Pick(&l, limits, now)
		fmt.Printf("%-5s agent %-5q → %s (runs: %v)\n", l.Type, l.Agent, p, ok)
	}
	// Output:
	// ralph agent ""    → codex (runs: true)
	// plan  agent ""    → opus (runs: false)
	// plan  agent "codex" → codex (runs: true)
}
