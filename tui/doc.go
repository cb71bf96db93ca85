// Package tui is loopr's live dashboard, `loopr tui` (docs/commands.md#the-dashboard):
// a bubbletea program that shows the loop tree (plan > spec > phase > ralph)
// with live priorities and the first reason each waiting loop does not
// start, the daemon's caps and rate-limit state, panes that explain a loop
// (why), describe it (details: the whole failure reason and the latest
// feedback first) or follow its agent's output, and a full-screen view of a
// loop's accepted artifact (v) to approve with eyes open.
//
// At 80×24 and below, each part gives way by dropping what matters least:
// the header drops the workspace, the uptime and idle type caps; the footer
// drops keys (never ? help and q quit); the details pane drops rows (never
// the status, the failure reason or the latest feedback); a question drops
// its words before its y/n; a text input's prompt gives way to its
// placeholder.
//
// The package talks to the daemon only through the small Client interface it
// declares; the client package implements it over the daemon's socket. State
// arrives on the event stream (a snapshot, then pushed changes), so the
// dashboard never polls for loops. Priorities, ages and countdowns tick
// locally from the loop records and a one-second clock tick. NEXT / WHY and
// the flat view come from the scheduler itself: the dashboard runs the pure
// scheduler.Plan over the loops it holds, with the workspace's policy
// (Options.Policy: tiers, conflict groups, quotas, fairness) and the caps,
// rate limit and disk state the daemon reports, again only when those change
// or time alone changes the plan. With fairness on the order shown is
// approximate: the learned fairness state lives in the daemon, and the
// dashboard plans from the zero state. The why pane (w) asks the daemon for
// the authoritative breakdown. The only periodic request is the agent
// output tail, once a second while the output pane is open; the pane
// renders the presets' structured output (package transcript) from what
// each read adds, and R shows the log as it was.
//
// The program is pure Elm (STYLE rule 14): Update changes the model and
// returns commands, every call to the client runs inside a tea.Cmd, keys are
// key.Bindings with help text, and every style lives in one struct. When the
// event stream drops, the model shows a banner and redials with backoff
// (1s, 2s, 4s … 10s); the snapshot that follows replaces its state.
package tui
