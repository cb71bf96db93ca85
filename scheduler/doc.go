// Package scheduler is loopr's pure decision core (SPEC §4, seed 004): given
// the waiting loops, the running set, the policy, the shared rate-limit state
// and an instant, Plan says which loops start now and, for every loop that
// does not, every reason why.
//
// It is a function, not a service: no goroutines, clock, store, logger or
// I/O. The caller (the loop manager, `loopr debug scheduler`, `loopr why`,
// the TUI) gathers a Snapshot and passes now; the same inputs always give the
// same Decision, which makes `debug scheduler --now` a faithful replay.
//
// Scores follow seed 004 exactly:
//
//	priority = base(type) + min(age_minutes × age_boost_per_minute, age_boost_max)
//	         + depth × depth_boost_per_level
//	         − min(max(iteration−1, 0) × retry_penalty_per_iteration, retry_penalty_max)
//
// Rows are ordered by priority desc, created_at asc, id asc, and that order
// also decides who gets the free slots.
//
// The policies of seeds 000–003 live in the same pipeline, each off unless
// the Policy sets it: priority tiers (ordered first, tier N runs at most N
// loops), conflict groups (one holder per group and conflict key), owners'
// running quotas, and fair queuing between fairness keys (within a tier,
// the key that has used least goes first; Fairness is the learned state the
// caller persists). README.md draws the pipeline and lists the reason codes.
package scheduler
