package loopmgr

import (
	"github.com/loopr-dev/loopr/internal/contain"
)

// Orphaned agents.
//
// The lease records an agent's pid once it runs, but a daemon can die
// between starting the agent and committing that pid (the crash suite hits
// this window under load), and validate commands never get one. Such
// processes outlive their daemon and would run on next to the loop's next
// iteration. Every process loopr starts for a loop carries LOOPR_HOME and
// LOOPR_LOOP_ID in its environment (SPEC §6), and so do the processes they
// start, so at recovery the manager finds them in /proc and kills their
// process groups (contain.KillMatching). Where /proc is missing (not Linux)
// only the lease's pid is killed. What cleared its environment is the
// business of the daemon's cgroups (contain.Jail.Recover), which end
// before the manager starts.

// killOrphans kills every process whose environment names home and one of
// ids (LOOPR_HOME, LOOPR_LOOP_ID), with its process group, and waits until
// they are gone. It returns how many processes it found.
func killOrphans(home string, ids map[string]bool) int {
	n := 0
	for id := range ids {
		n += contain.KillMatching(contain.Match{Home: home, Loop: id})
	}
	return n
}
