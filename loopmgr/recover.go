package loopmgr

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// RecordPID stores the agent's pid and process start time in the loop's
// lease, so a daemon restarted after a crash can kill exactly that group.
func (m *Manager) RecordPID(id string, pid int) {
	start := procStart(pid)
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		cur, err := tx.Get(id)
		if err != nil || cur.Status != loop.Running || cur.Lease == nil || cur.Lease.Owner != m.o.Owner {
			return err
		}
		lease := *cur.Lease
		lease.PID, lease.PIDStart = pid, start
		cur.Lease = &lease
		return tx.Put(cur)
	})
	if err != nil {
		m.log.Warn("record agent pid", "loop", id, "pid", pid, "err", err)
	}
}

// recover reclaims loops left running by a daemon that did not stop
// cleanly: their agent process groups are killed and the expired lease
// counts as one failed attempt. Orphaned worktrees are swept.
func (m *Manager) recover(ctx context.Context) error {
	now := m.now()
	m.held = true // look once for loops a long limit put in needs_human
	var stale []loop.Loop
	err := m.svc.Store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Running, func(l loop.Loop) bool { stale = append(stale, l); return true })
	})
	if err != nil {
		return err
	}
	// Processes of these loops whose pid never reached the lease (the
	// daemon died first) and their validate commands: see orphans.go.
	ids := make(map[string]bool, len(stale))
	for _, l := range stale {
		ids[l.ID] = true
	}
	if n := killOrphans(m.svc.Paths.Home, ids); n > 0 {
		m.log.Warn("killed processes a crashed daemon left running", "count", n)
	}
	if m.clustered() {
		// Other workers run these: the scheduler recovers those of lost
		// workers (recoverLost), and their pids are of other machines.
		stale = nil
	}
	for _, l := range stale {
		if l.Lease != nil && l.Lease.PID > 0 {
			killGroup(l.Lease.PID, l.Lease.PIDStart)
		}
		reason := fmt.Sprintf("lease expired: the daemon stopped unexpectedly during iteration %d", l.Iteration)
		err := m.svc.Store.Update(func(tx *store.Tx) error {
			cur, err := tx.Get(l.ID)
			if err != nil || cur.Status != loop.Running {
				return err
			}
			if sess := cur.Session; sess != nil && sess.Ended == "" {
				ended := *sess // its agent was killed mid-run: resumed (agent.resume)
				ended.Ended = loop.SessionInterrupted
				cur.Session = &ended
			}
			return m.failLoop(tx, cur, reason, "The previous attempt was interrupted (daemon crash); start again from the current state of the workdir.", now)
		})
		if err != nil {
			return err
		}
		m.log.Warn("reclaimed loop from a crashed daemon", "loop", l.ID, "iteration", l.Iteration)
	}
	if m.o.Git != nil {
		live := map[string]bool{}
		err := m.svc.Store.View(func(tx *store.Tx) error {
			for _, st := range []loop.Status{loop.Pending, loop.Paused, loop.Running, loop.Merging, loop.AwaitingApproval, loop.AwaitingReview, loop.NeedsHuman} {
				if err := tx.ByStatus(st, func(l loop.Loop) bool { live[l.ID] = true; return true }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		removed, err := m.o.Git.Sweep(ctx, func(id string) bool { return live[id] })
		if err != nil {
			m.log.Warn("sweep worktrees", "err", err)
		} else if len(removed) > 0 {
			m.log.Info("swept orphaned worktrees", "count", len(removed))
		}
		m.sweepLosers(ctx)
	}
	if len(stale) > 0 {
		m.o.Notify()
	}
	return nil
}

// killGroup kills the process group led by pid, if pid is still the same
// process (its start time matches): pids are reused.
func killGroup(pid int, start uint64) {
	if pid <= 1 {
		return
	}
	if start != 0 && procStart(pid) != start {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	// Give the kernel a moment to reap before the loop is restarted.
	for i := 0; i < 50 && procStart(pid) == start && start != 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// procStart returns a process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22), or 0 when unknown.
func procStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0
	}
	if fields[0] == "Z" {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}
