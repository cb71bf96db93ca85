package control

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// FreeGB returns the free space of the file system holding path, in GB
// (10^9 bytes), walking up to an existing directory.
func FreeGB(path string) (float64, error) {
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(path, &st)
		if err == nil {
			return float64(st.Bavail) * float64(st.Bsize) / 1e9, nil
		}
		if !errors.Is(err, syscall.ENOENT) {
			return 0, fmt.Errorf("disk free %s: %w", path, err)
		}
		parent := parentDir(path)
		if parent == path {
			return 0, fmt.Errorf("disk free %s: %w", path, err)
		}
		path = parent
	}
}

func parentDir(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

// Snapshot is the scheduler's input plus what explanations need.
type Snapshot struct {
	scheduler.Snapshot
	RunningTotal int
	DiskFreeGB   float64
}

// Snapshot reads everything the scheduler needs in one read transaction:
// waiting loops, the running loops and their counts by type, each distinct
// parent's status once, the rate-limit state and, with fairness on, each
// waiting loop's root (every ancestor read once) and the fairness state;
// then checks each distinct triggering artifact once and the free disk space.
func (s *Service) Snapshot() (Snapshot, error) {
	if ix := s.Index(); ix != nil {
		return s.indexSnapshot(ix)
	}
	var snap Snapshot
	snap.Running = map[string]int{}
	fair := s.cfg().Scheduler.Fairness.Enabled
	err := s.Store.View(func(tx *store.Tx) error {
		parents := map[string]*loop.Loop{}
		collect := func(l loop.Loop) bool {
			c := l
			snap.Waiting = append(snap.Waiting, scheduler.Candidate{Loop: &c})
			if l.Parent != "" {
				parents[l.Parent] = nil
			}
			return true
		}
		for _, st := range []loop.Status{loop.Pending, loop.Paused} {
			if err := tx.ByStatus(st, collect); err != nil {
				return err
			}
		}
		if err := tx.ByStatus(loop.Running, func(l loop.Loop) bool {
			snap.Running[l.Type]++
			snap.RunningTotal++
			snap.Active = append(snap.Active, &l)
			return true
		}); err != nil {
			return err
		}
		for id := range parents {
			p, err := tx.Get(id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			parents[id] = &p
		}
		for i := range snap.Waiting {
			c := &snap.Waiting[i]
			if c.Loop.Parent == "" {
				continue
			}
			if p := parents[c.Loop.Parent]; p == nil {
				c.ParentMissing = true
			} else {
				c.ParentStatus = p.Status
			}
		}
		if fair {
			r := roots{tx: tx, known: parents, root: map[string]string{}}
			for i := range snap.Waiting {
				c := &snap.Waiting[i]
				if c.Loop.FairnessKey != "" || c.Loop.Parent == "" {
					continue
				}
				root, err := r.of(c.Loop.Parent)
				if err != nil {
					return err
				}
				c.Root = root
			}
			var err error
			if snap.Fairness, err = loadFairness(tx); err != nil {
				return err
			}
		}
		_, err := tx.Meta(RateLimitKey, &snap.RateLimit)
		return err
	})
	if err != nil {
		return Snapshot{}, err
	}
	present := map[string]bool{}
	for i := range snap.Waiting {
		c := &snap.Waiting[i]
		path := c.Loop.TriggeredBy
		if path == "" {
			continue
		}
		ok, seen := present[path]
		if !seen {
			_, err := os.Stat(path)
			ok = err == nil
			present[path] = ok
		}
		c.ArtifactMissing = !ok
	}
	snap.DiskFreeGB, snap.DiskLow, snap.DiskLowText = s.diskGate()
	return snap, nil
}

// diskGate measures the home's free space and says whether the disk_low
// gate holds, with its text.
func (s *Service) diskGate() (free float64, low bool, text string) {
	free, err := s.disk(s.Paths.Home)
	if err != nil {
		return 0, false, ""
	}
	switch min := s.cfg().Storage.DiskQuotaMinGB; {
	case free < diskFloorGB: // full, whatever the quota (disk.go)
		return free, true, fmt.Sprintf("disk full: %s < %d MiB", freeText(free), DiskFloorBytes>>20)
	case min > 0 && free < min:
		return free, true, fmt.Sprintf("disk low: %.1f GB free < %g GB", free, min)
	}
	return free, false, ""
}

// Plan runs the scheduler over a fresh snapshot at now.
func (s *Service) Plan(now time.Time) (Snapshot, scheduler.Decision, error) {
	snap, err := s.Snapshot()
	if err != nil {
		return Snapshot{}, scheduler.Decision{}, err
	}
	return snap, scheduler.Plan(snap.Snapshot, now, Policy(s.cfg())), nil
}

// Row converts a scheduler row to its wire form.
func Row(r scheduler.Row, now time.Time) api.SchedRow {
	out := api.SchedRow{
		ID: r.Loop.ID, Type: r.Loop.Type, Status: r.Loop.Status, Title: r.Loop.Title,
		Priority: r.Score.Priority, Base: r.Score.Base, AgeBoost: r.Score.AgeBoost,
		Depth: r.Score.Depth, DepthBoost: r.Score.DepthBoost, Iteration: r.Score.Iteration,
		RetryPenalty: r.Score.RetryPenalty, Runnable: r.Runnable,
		Reasons: []string{}, ReasonText: []string{},
		AgeSeconds: max(0, int64(now.Sub(r.Loop.CreatedAt)/time.Second)),
		Tier:       r.Tier, FairnessKey: r.Key, KeyUsed: r.KeyUsed, Cost: r.Cost,
	}
	for _, rs := range r.Reasons {
		out.Reasons = append(out.Reasons, string(rs.Code))
		out.ReasonText = append(out.ReasonText, rs.Text)
	}
	return out
}

// Scheduler returns the debug plan at now (`loopr debug scheduler`).
func (s *Service) Scheduler(now time.Time) (api.SchedulerView, error) {
	_, d, err := s.Plan(now)
	if err != nil {
		return api.SchedulerView{}, err
	}
	v := api.SchedulerView{Now: now, Waiting: d.Waiting, Eligible: d.Eligible, Running: d.Running, Slots: d.Slots,
		Rows: make([]api.SchedRow, len(d.Rows))}
	for i, r := range d.Rows {
		v.Rows[i] = Row(r, now)
	}
	return v, nil
}

// Why explains one loop at now: its score breakdown and every gate, passed
// or failed, with numbers.
func (s *Service) Why(id string, now time.Time) (api.Why, error) {
	l, err := s.Get(id)
	if err != nil {
		return api.Why{}, err
	}
	snap, d, err := s.Plan(now)
	if err != nil {
		return api.Why{}, err
	}
	c := s.cfg()
	p := Policy(c)
	w := api.Why{Loop: l, Now: now}
	var row *scheduler.Row
	for i := range d.Rows {
		if d.Rows[i].Loop.ID == id {
			row = &d.Rows[i]
			break
		}
	}
	if row == nil {
		r := scheduler.Row{Loop: &l, Score: scheduler.ScoreOf(&l, now, p)}
		row = &r
	} else {
		w.Scheduled = true
	}
	w.Row = Row(*row, now)
	w.AgeMinutes = row.Score.AgeMinutes
	sc := row.Score
	wt := p.Weights
	w.Formula = fmt.Sprintf("priority %d = base %d + age %d (%d min × %d, max %d) + depth %d (%d × %d) − retry %d ((%d−1) × %d, max %d)",
		sc.Priority, sc.Base, sc.AgeBoost, sc.AgeMinutes, wt.AgeBoostPerMinute, wt.AgeBoostMax,
		sc.DepthBoost, sc.Depth, wt.DepthBoostPerLevel, sc.RetryPenalty, sc.Iteration, wt.RetryPenaltyPerIteration, wt.RetryPenaltyMax)
	if !w.Scheduled {
		w.Gates = []api.Gate{{Code: "status", OK: false, Text: fmt.Sprintf("status %s: only pending loops are scheduled", l.Status)}}
		return w, nil
	}
	failed := map[scheduler.Code]string{}
	for _, r := range row.Reasons {
		failed[r.Code] = r.Text
	}
	gate := func(code scheduler.Code, okText string) {
		if t, bad := failed[code]; bad {
			w.Gates = append(w.Gates, api.Gate{Code: string(code), OK: false, Text: t})
			return
		}
		w.Gates = append(w.Gates, api.Gate{Code: string(code), OK: true, Text: okText})
	}
	if l.Status == loop.Paused {
		gate(scheduler.Paused, "")
	}
	if l.Parent != "" {
		if _, ok := failed[scheduler.Orphaned]; ok {
			gate(scheduler.Orphaned, "")
		} else {
			gate(scheduler.ParentIncomplete, "parent complete")
		}
	}
	if l.TriggeredBy != "" {
		gate(scheduler.ArtifactMissing, "artifact present")
	}
	gate(scheduler.Backoff, "no backoff")
	if !l.Deadline.IsZero() {
		gate(scheduler.DeadlinePassed, "deadline "+l.Deadline.Format(time.RFC3339))
	}
	if c.Storage.DiskQuotaMinGB > 0 || snap.DiskLow {
		gate(scheduler.DiskLow, fmt.Sprintf("disk %.1f GB free", snap.DiskFreeGB))
	}
	gate(scheduler.RateLimited, "not rate limited")
	capText := "no cap"
	if tc := p.TypeCap[l.Type]; tc > 0 {
		capText = fmt.Sprintf("%d/%d", snap.Running[l.Type], tc)
	}
	gate(scheduler.TypeCap, fmt.Sprintf("type cap %s %s", l.Type, capText))
	gate(scheduler.GlobalCap, fmt.Sprintf("global cap %d/%d", snap.RunningTotal, p.MaxLoops))
	if tier := p.Tier[l.Type]; tier > 0 {
		n := 0
		for t, k := range snap.Running {
			if p.Tier[t] == tier {
				n += k
			}
		}
		gate(scheduler.TierCap, fmt.Sprintf("tier %d cap %d/%d", tier, n, tier))
	}
	if q := p.OwnerCap[l.Owner]; q > 0 {
		n := 0
		for _, a := range snap.Active {
			if a.Owner == l.Owner {
				n++
			}
		}
		gate(scheduler.Quota, fmt.Sprintf("quota %s %d/%d", l.Owner, n, q))
	}
	if g := p.ConflictGroup[l.Type]; g != "" && l.ConflictKey != "" {
		gate(scheduler.Conflict, fmt.Sprintf("no conflict on %s/%s", g, l.ConflictKey))
	}
	return w, nil
}

// Status summarises the store: counts, usage against caps, rate limit, disk.
func (s *Service) Status(now time.Time) (api.Status, error) {
	c := s.cfg()
	st := api.Status{Home: s.Paths.Home, Workspace: s.Paths.Workspace, Protocol: api.ProtocolVersion,
		MaxLoops: c.Concurrency.MaxLoops, Accepting: true, Store: s.Store.Backend() + " " + s.Store.Where()}
	var rl ratelimit.State
	running := map[string]int{}
	err := s.Store.View(func(tx *store.Tx) error {
		var err error
		if st.Counts, err = tx.Counts(); err != nil {
			return err
		}
		if err := tx.ByStatus(loop.Running, func(l loop.Loop) bool { running[l.Type]++; return true }); err != nil {
			return err
		}
		_, err = tx.Meta(RateLimitKey, &rl)
		return err
	})
	if err != nil {
		return api.Status{}, err
	}
	for _, stt := range loop.Statuses {
		if _, ok := st.Counts[stt]; !ok {
			st.Counts[stt] = 0
		}
	}
	st.Running = st.Counts[loop.Running]
	for _, t := range c.Types() {
		st.Types = append(st.Types, api.TypeUsage{Type: t, Running: running[t], Cap: c.TypeCap(t)})
	}
	st.RateLimit = rl
	st.RateLimited = rl.Blocked(now)
	st.Recovering = rl.Recovering(now)
	if st.RateLimited {
		st.ResumeAt = rl.ResumeAt()
	}
	if free, err := s.disk(s.Paths.Home); err == nil {
		st.DiskFreeGB = free
		st.DiskLow = c.Storage.DiskQuotaMinGB > 0 && free < c.Storage.DiskQuotaMinGB
		st.DiskFull = free < diskFloorGB
		st.DiskLow = st.DiskLow || st.DiskFull
	}
	return st, nil
}

// Import stores loops read from an export, all or nothing.
func (s *Service) Import(loops []loop.Loop) (int, error) {
	for _, l := range loops {
		if !s.cfg().KnownType(l.Type) {
			return 0, Invalid("import", "loop %s: unknown type %q", l.ID, l.Type)
		}
	}
	return s.Store.Import(loops)
}
