// Package daemonbench holds the benchmarks of the real daemon: at scale,
// `loopr list --json` and `loopr debug scheduler` through it, its resident
// memory and its start time, each with 120,000 loop records (100,000 of
// them waiting); and under load, the latency of `loopr status` while six
// agents run and their passes merge (status_test.go). Each is measured next
// to a baseline of the same run. The loopr binary under test is $LOOPR_BIN,
// or one built from ./cmd/loopr. See BENCHMARKS.md.
package daemonbench
