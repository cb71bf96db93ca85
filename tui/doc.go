// Package tui is loopr's live dashboard, `loopr tui` (SPEC §10): a bubbletea
// program that shows the loop tree (plan > spec > phase > ralph) with live
// priorities and the first reason each waiting loop does not start, the
// daemon's caps and rate-limit state, and panes that explain a loop (why),
// describe it (details) or follow its agent's output.
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
// output tail, once a second while the output pane is open.
//
// The program is pure Elm (STYLE rule 14): Update changes the model and
// returns commands, every call to the client runs inside a tea.Cmd, keys are
// key.Bindings with help text, and every style lives in one struct. When the
// event stream drops, the model shows a banner and redials with backoff
// (1s, 2s, 4s … 10s); the snapshot that follows replaces its state.
package tui
