package control

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
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
// With the tree term on it adds the work left in each tree of a waiting
// loop (treeWork).
func (s *Service) Snapshot() (Snapshot, error) { return s.snapshotAt(s.Now()) }

// snapshotAt is Snapshot for a decision at now.
func (s *Service) snapshotAt(now time.Time) (Snapshot, error) {
	if ix := s.Index(); ix != nil {
		return s.indexSnapshot(ix, now)
	}
	var snap Snapshot
	snap.Running = map[string]int{}
	p := Policy(s.cfg())
	fair, tree := p.Fairness.Enabled, p.Weights.TreeOn()
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
		for _, st := range []loop.Status{loop.Pending, loop.Paused, loop.NeedsHuman} {
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
		if err := fillDeps(tx, snap.Waiting, parents); err != nil {
			return err
		}
		var err error
		if snap.Spent, err = s.spentTrees(tx); err != nil {
			return err
		}
		r := roots{tx: tx, known: parents, root: map[string]string{}}
		if fair || len(snap.Spent) > 0 || tree {
			for i := range snap.Waiting {
				c := &snap.Waiting[i]
				if (c.Loop.FairnessKey != "" && len(snap.Spent) == 0 && !tree) || c.Loop.Parent == "" {
					continue
				}
				root, err := r.of(c.Loop.Parent)
				if err != nil {
					return err
				}
				c.Root = root
			}
		}
		if fair {
			if snap.Fairness, err = loadFairness(tx); err != nil {
				return err
			}
		}
		if tree {
			if snap.Trees, err = treeWork(tx, &snap, &r, p.Fairness, now); err != nil {
				return err
			}
		}
		snap.Limits, err = LoadLimits(tx)
		return err
	})
	if err != nil {
		return Snapshot{}, err
	}
	present := map[string]bool{}
	var paths []string
	for i := range snap.Waiting {
		if path := snap.Waiting[i].Loop.TriggeredBy; path != "" {
			if _, seen := present[path]; !seen {
				present[path] = false
				paths = append(paths, path)
			}
		}
	}
	if len(paths) > 0 {
		for i, ok := range s.artifactsExist(paths) {
			present[paths[i]] = ok
		}
	}
	for i := range snap.Waiting {
		c := &snap.Waiting[i]
		if path := c.Loop.TriggeredBy; path != "" {
			c.ArtifactMissing = !present[path]
		}
	}
	snap.DiskFreeGB, snap.DiskLow, snap.DiskLowText = s.diskGate()
	snap.Preflight, snap.NoGit, snap.NoGitText = s.gateInputs()
	snap.Untrusted = s.Untrusted()
	return snap, nil
}

// treeWork returns the work left in each tree of a waiting loop of snap
// (scheduler.Snapshot.Trees): scheduler.AddWork for every unfinished loop
// of those trees, the waiting and running ones snap holds and the merging
// and awaiting ones read here, each estimated with the learned durations.
// r has the waiting loops' roots.
func treeWork(tx *store.Tx, snap *Snapshot, r *roots, fp scheduler.FairnessPolicy, now time.Time) (map[string]scheduler.TreeWork, error) {
	d, err := loadDurations(tx)
	if err != nil {
		return nil, err
	}
	trees := map[string]scheduler.TreeWork{}
	created := func(root string) (time.Time, error) {
		if l, ok := r.known[root]; ok {
			if l == nil {
				return time.Time{}, nil
			}
			return l.CreatedAt, nil
		}
		l, err := tx.Get(root)
		switch {
		case errors.Is(err, store.ErrNotFound):
			r.known[root] = nil
			return time.Time{}, nil
		case err != nil:
			return time.Time{}, err
		}
		r.known[root] = &l
		return l.CreatedAt, nil
	}
	add := func(l *loop.Loop, root string, only bool) error {
		if root == "" {
			root = l.ID
		}
		if _, ok := trees[root]; only && !ok {
			return nil // not the tree of a waiting loop
		}
		at, err := created(root)
		if err != nil {
			return err
		}
		scheduler.AddWork(trees, root, at, l, d, fp, now)
		return nil
	}
	for i := range snap.Waiting {
		c := &snap.Waiting[i]
		if err := add(c.Loop, c.Root, false); err != nil {
			return nil, err
		}
	}
	busy := slices.Clone(snap.Active)
	for _, st := range []loop.Status{loop.Merging, loop.AwaitingApproval, loop.AwaitingReview} {
		if err := tx.ByStatus(st, func(l loop.Loop) bool { busy = append(busy, &l); return true }); err != nil {
			return nil, err
		}
	}
	for _, l := range busy {
		root, err := r.of(l.Parent)
		if err != nil {
			return nil, err
		}
		if err := add(l, root, true); err != nil {
			return nil, err
		}
	}
	return trees, nil
}

// fillDeps sets the Deps of the candidates that depend on other loops,
// reading each dependency once (known holds records already read).
func fillDeps(tx *store.Tx, waiting []scheduler.Candidate, known map[string]*loop.Loop) error {
	deps := map[string]*loop.Loop{}
	for i := range waiting {
		c := &waiting[i]
		if len(c.Loop.DependsOn) == 0 {
			continue
		}
		c.Deps = make([]scheduler.Dep, len(c.Loop.DependsOn))
		for j, id := range c.Loop.DependsOn {
			d, seen := deps[id]
			if !seen {
				if d = known[id]; d == nil {
					l, err := tx.Get(id)
					switch {
					case err == nil:
						d = &l
					case !errors.Is(err, store.ErrNotFound):
						return err
					}
				}
				deps[id] = d
			}
			c.Deps[j] = scheduler.DepOf(id, d)
		}
	}
	return nil
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
	snap, err := s.snapshotAt(now)
	if err != nil {
		return Snapshot{}, scheduler.Decision{}, err
	}
	return snap, scheduler.Plan(snap.Snapshot, now, Policy(s.cfg())), nil
}

// Row converts a scheduler row to its wire form.
func Row(r scheduler.Row, now time.Time) api.SchedRow {
	var out api.SchedRow
	fillRow(&out, &r, now)
	return out
}

// fillRow sets *out to r's wire form, reusing out's slices.
func fillRow(out *api.SchedRow, r *scheduler.Row, now time.Time) {
	reasons, texts := out.Reasons[:0], out.ReasonText[:0]
	if reasons == nil {
		reasons, texts = make([]string, 0, len(r.Reasons)), make([]string, 0, len(r.Reasons))
	}
	for _, rs := range r.Reasons {
		reasons = append(reasons, string(rs.Code))
		texts = append(texts, rs.Text)
	}
	*out = api.SchedRow{
		ID: r.Loop.ID, Type: r.Loop.Type, Status: r.Loop.Status, Title: r.Loop.Title,
		Priority: r.Score.Priority, Base: r.Score.Base, AgeBoost: r.Score.AgeBoost,
		Depth: r.Score.Depth, DepthBoost: r.Score.DepthBoost, Iteration: r.Score.Iteration,
		RetryPenalty: r.Score.RetryPenalty, Runnable: r.Runnable,
		Reasons: reasons, ReasonText: texts,
		AgeSeconds: max(0, int64(now.Sub(r.Loop.CreatedAt)/time.Second)),
		Tier:       r.Tier, FairnessKey: r.Key, KeyUsed: r.KeyUsed, Cost: r.Cost, Agent: r.Agent,
		TreeBoost: r.Score.TreeBoost, TreeAgeBoost: r.Score.TreeAgeBoost, TreeLeft: r.Score.TreeLeft,
		TreeLeast: r.Score.TreeLeast, TreeAgeMinutes: r.Score.TreeAgeMinutes,
	}
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

// SchedulerRows hands the rows of the plan at now to row one at a time, in
// order, each in the same *api.SchedRow (valid only during the call),
// without building the rows of every waiting loop first; v's Rows stay
// empty. It returns the view, or the first error row returns.
func (s *Service) SchedulerRows(now time.Time, row func(v *api.SchedulerView, r *api.SchedRow) error) (api.SchedulerView, error) {
	_, d, err := s.Plan(now)
	if err != nil {
		return api.SchedulerView{}, err
	}
	v := api.SchedulerView{Now: now, Waiting: d.Waiting, Eligible: d.Eligible, Running: d.Running, Slots: d.Slots}
	var r api.SchedRow
	for i := range d.Rows {
		fillRow(&r, &d.Rows[i], now)
		if err := row(&v, &r); err != nil {
			return v, err
		}
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
	w.Formula = row.Score.Explain(p.Weights)
	if w.Scheduled && p.Weights.TreeOn() {
		w.Tree = treeWhy(snap.Waiting, d.Rows, row)
	}
	if !w.Scheduled {
		text := fmt.Sprintf("status %s: only pending loops are scheduled", l.Status)
		switch {
		case l.Status == loop.NeedsHuman && l.Needs != nil:
			text = fmt.Sprintf("status needs_human (%s): %s", l.Needs.Reason, l.Needs.Detail)
		case l.Status == loop.Merging:
			text = "status merging: its iteration passed; the merge queue merges its branch into the plan branch (merge.validate, merge.batch) — no agent runs for it again unless the merge sends it back"
			if u := s.Untrusted(); u != "" {
				text += "; the merge queue waits: " + u
			}
		}
		w.Gates = []api.Gate{{Code: "status", OK: false, Text: text}}
		return w, nil
	}
	failed := map[scheduler.Code]string{}
	for _, r := range row.Reasons {
		failed[r.Code] = r.Text
	}
	if t, ok := failed[scheduler.Backoff]; ok && loop.Held(l.Reason) {
		// A before_run hook failed, or the agent could not be started
		// (the scheduler sees no reasons: its records are heads): say
		// which, and why.
		failed[scheduler.Backoff] = strings.Replace(t, "scheduled for ", "backoff until ", 1) + ": " + l.Reason
	}
	gate := func(code scheduler.Code, okText string) {
		if t, bad := failed[code]; bad {
			w.Gates = append(w.Gates, api.Gate{Code: string(code), OK: false, Text: t})
			return
		}
		w.Gates = append(w.Gates, api.Gate{Code: string(code), OK: true, Text: okText})
	}
	switch l.Status {
	case loop.Paused:
		gate(scheduler.Paused, "")
	case loop.NeedsHuman:
		gate(scheduler.NeedsHuman, "")
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
	if len(l.DependsOn) > 0 {
		text, err := s.dependsWhy(l.DependsOn)
		if err != nil {
			return api.Why{}, err
		}
		_, waits := failed[scheduler.DependsOn]
		w.Gates = append(w.Gates, api.Gate{Code: string(scheduler.DependsOn), OK: !waits, Text: text})
	}
	gate(scheduler.Backoff, "no backoff")
	if !l.Deadline.IsZero() {
		gate(scheduler.DeadlinePassed, "deadline "+l.Deadline.Format(time.RFC3339))
	}
	if c.Storage.DiskQuotaMinGB > 0 || snap.DiskLow {
		gate(scheduler.DiskLow, fmt.Sprintf("disk %.1f GB free", snap.DiskFreeGB))
	}
	if _, bad := failed[scheduler.Untrusted]; bad {
		gate(scheduler.Untrusted, "")
	}
	gate(scheduler.Preflight, "agent and validate programs found")
	if l.Budget != (loop.Budget{}) || len(snap.Spent) > 0 {
		gate(scheduler.Budget, "budget not spent")
	}
	if row.Agent != "" {
		gate(scheduler.RateLimited, "agent "+row.Agent+" not rate limited")
	} else {
		gate(scheduler.RateLimited, "not rate limited")
	}
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
	if snap.NoGit[l.Type] {
		n := 0
		for t, k := range snap.Running {
			if snap.NoGit[t] {
				n += k
			}
		}
		gate(scheduler.NoGit, fmt.Sprintf("no git worktrees: shared workspace %d/1", n))
	}
	return w, nil
}

// dependsWhy says, for why, where each dependency is: `after 01AB…
// "Handlers" (done), 01CD… "Docs" (cancelled: counts as done)`, or `waits
// for …` while one is not done.
func (s *Service) dependsWhy(ids []string) (string, error) {
	parts := make([]string, 0, len(ids))
	waits := false
	err := s.Store.View(func(tx *store.Tx) error {
		for _, id := range ids {
			d, err := tx.Get(id)
			if errors.Is(err, store.ErrNotFound) {
				parts = append(parts, id+" (gone: counts as done)")
				continue
			}
			if err != nil {
				return err
			}
			state := "done"
			switch {
			case d.Status == loop.Cancelled:
				state = "cancelled: counts as done"
			case d.DependencyMet():
			case d.Status == loop.Complete:
				state, waits = "complete, not all loops below it", true
			default:
				state, waits = string(d.Status), true
			}
			parts = append(parts, fmt.Sprintf("%s %q (%s)", d.ID, d.Title, state))
		}
		return nil
	})
	if waits {
		return "waits for " + strings.Join(parts, ", "), err
	}
	return "after " + strings.Join(parts, ", "), err
}

// NeedsItem describes l, a loop that needs a person, for status.
func NeedsItem(l loop.Loop) api.NeedsYou {
	n := api.NeedsYou{ID: l.ID, Type: l.Type, Title: l.Title, Since: l.UpdatedAt,
		Action: l.NeedsAction()}
	if l.Needs != nil {
		n.Reason, n.Since = l.Needs.Reason, l.Needs.Since
		first, _, _ := strings.Cut(l.Needs.Detail, "\n")
		if len(first) > 200 {
			first = strings.ToValidUTF8(first[:200], "") + "…"
		}
		n.Detail = first
	}
	return n
}

// Status summarises the store: counts, usage against caps, rate limit,
// disk, and the loops that need a person.
func (s *Service) Status(now time.Time) (api.Status, error) {
	c := s.cfg()
	st := api.Status{Home: s.Paths.Home, Workspace: s.Paths.Workspace, Protocol: api.ProtocolVersion,
		MaxLoops: c.Concurrency.MaxLoops, Accepting: true, Store: s.Store.Backend() + " " + s.Store.Where(),
		Sandbox: SandboxStatus(c)}
	var limits map[string]ratelimit.State
	running := map[string]int{}
	err := s.Store.View(func(tx *store.Tx) error {
		var err error
		if st.Counts, err = tx.Counts(); err != nil {
			return err
		}
		if err := tx.ByStatus(loop.Running, func(l loop.Loop) bool { running[l.Type]++; return true }); err != nil {
			return err
		}
		if err := tx.ByStatus(loop.NeedsHuman, func(l loop.Loop) bool {
			st.NeedsYou = append(st.NeedsYou, NeedsItem(l))
			return true
		}); err != nil {
			return err
		}
		if err := tx.ByStatus(loop.AwaitingApproval, func(l loop.Loop) bool {
			st.AwaitingApproval = append(st.AwaitingApproval, api.Approval{ID: l.ID, Type: l.Type, Title: l.Title,
				Since: l.UpdatedAt, Actions: api.ApprovalActions(l.ID)})
			return true
		}); err != nil {
			return err
		}
		if err := tx.ByStatus(loop.AwaitingReview, func(l loop.Loop) bool {
			st.AwaitingReview = append(st.AwaitingReview, api.Approval{ID: l.ID, Type: l.Type, Title: l.Title,
				Since: l.UpdatedAt, Actions: api.ReviewActions(l.ID)})
			return true
		}); err != nil {
			return err
		}
		if err := tx.RootsByStatus(loop.Complete, func(l loop.Loop) bool {
			if l.ReadyToLand() {
				st.ReadyToLand = append(st.ReadyToLand, api.LandReady{ID: l.ID, Title: l.Title,
					Branch: cmp.Or(l.Branch, gitflow.BranchName(l.ID, l.Title)), Into: l.Base.Branch, Since: l.SubtreeDoneAt})
			}
			return true
		}); err != nil {
			return err
		}
		if limits, err = LoadLimits(tx); err != nil {
			return err
		}
		if st.Spent, err = s.spentTrees(tx); err != nil {
			return err
		}
		if Policy(c).Weights.TreeOn() {
			if st.Durations, err = loadDurations(tx); err != nil {
				return err
			}
		}
		st.SpentToday, err = UsageToday(tx, now)
		return err
	})
	if err != nil {
		return api.Status{}, err
	}
	if len(st.Spent) == 0 {
		st.Spent = nil
	}
	for _, stt := range loop.Statuses {
		if _, ok := st.Counts[stt]; !ok {
			st.Counts[stt] = 0
		}
	}
	st.Running = st.Counts[loop.Running]
	slices.SortStableFunc(st.NeedsYou, func(a, b api.NeedsYou) int { return a.Since.Compare(b.Since) })
	if len(st.NeedsYou) > api.MaxNeedsYou {
		st.NeedsYou = st.NeedsYou[:api.MaxNeedsYou]
	}
	slices.SortStableFunc(st.AwaitingApproval, func(a, b api.Approval) int { return a.Since.Compare(b.Since) })
	if len(st.AwaitingApproval) > api.MaxNeedsYou {
		st.AwaitingApproval = st.AwaitingApproval[:api.MaxNeedsYou]
	}
	slices.SortStableFunc(st.AwaitingReview, func(a, b api.Approval) int { return a.Since.Compare(b.Since) })
	if len(st.AwaitingReview) > api.MaxNeedsYou {
		st.AwaitingReview = st.AwaitingReview[:api.MaxNeedsYou]
	}
	slices.SortStableFunc(st.ReadyToLand, func(a, b api.LandReady) int { return a.Since.Compare(b.Since) })
	if len(st.ReadyToLand) > api.MaxNeedsYou {
		st.ReadyToLand = st.ReadyToLand[:api.MaxNeedsYou]
	}
	for _, t := range c.Types() {
		st.Types = append(st.Types, api.TypeUsage{Type: t, Running: running[t], Cap: c.TypeCap(t)})
	}
	st.Problems = APIProblems(c, s.lastPreflight())
	st.NoGit = s.NoGit()
	st.Trust = s.Trust()
	st.Limits = limits
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		rl := limits[name]
		pl := profileLimit(name, rl, now)
		st.Profiles = append(st.Profiles, pl)
		// The summary fields of one shared state: the profile that resumes last.
		if rl.BackoffUntil.After(st.RateLimit.BackoffUntil) || st.RateLimit == (ratelimit.State{}) {
			st.RateLimit = rl
		}
		st.RateLimited = st.RateLimited || pl.Limited
		st.Recovering = st.Recovering || pl.Recovering
		if pl.Limited && pl.ResumeAt.After(st.ResumeAt) {
			st.ResumeAt = pl.ResumeAt
		}
	}
	if len(st.Limits) == 0 {
		st.Limits = nil
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
	defer s.forgetSpent() // usage and budgets came with the loops
	n, err := s.Store.Import(loops)
	if err != nil {
		return n, err
	}
	for _, l := range loops {
		if l.Budget != (loop.Budget{}) {
			err = s.Store.Update(func(tx *store.Tx) error { return s.noteBudget(tx, l.Budget) })
			break
		}
	}
	return n, err
}

// treeWhy says what the tree term did to row's place among rows (a plan's,
// in order): the rows of other trees before it that would be after it
// without the tree term, up to three of them named.
func treeWhy(waiting []scheduler.Candidate, rows []scheduler.Row, row *scheduler.Row) string {
	tree := map[string]string{} // loop id → root id
	for i := range waiting {
		c := &waiting[i]
		tree[c.Loop.ID] = cmp.Or(c.Root, c.Loop.ID)
	}
	without := func(r *scheduler.Row) int { return r.Score.Priority - r.Score.TreeBoost - r.Score.TreeAgeBoost }
	mine := tree[row.Loop.ID]
	var named []string
	n := 0
	for i := range rows {
		r := &rows[i]
		if r.Loop.ID == row.Loop.ID {
			break
		}
		if tree[r.Loop.ID] == mine || r.Tier != row.Tier {
			continue
		}
		a, b := without(r), without(row)
		if a > b || (a == b && (r.Loop.CreatedAt.Before(row.Loop.CreatedAt) ||
			r.Loop.CreatedAt.Equal(row.Loop.CreatedAt) && r.Loop.ID < row.Loop.ID)) {
			continue // ahead of it without the tree term too
		}
		if n++; len(named) < 3 {
			named = append(named, fmt.Sprintf("%s %q (tree %s: %s left, tree +%d, tree age +%d)",
				loop.ShortID(r.Loop.ID), r.Loop.Title, loop.ShortID(tree[r.Loop.ID]), scheduler.Seconds(r.Score.TreeLeft),
				r.Score.TreeBoost, r.Score.TreeAgeBoost))
		}
	}
	here := fmt.Sprintf("this tree %s: %s left, tree +%d, tree age +%d", loop.ShortID(mine),
		scheduler.Seconds(row.Score.TreeLeft), row.Score.TreeBoost, row.Score.TreeAgeBoost)
	switch {
	case n == 0:
		return "the tree term put no loop of another tree ahead of it (" + here + ")"
	case n > len(named):
		named = append(named, fmt.Sprintf("and %d more", n-len(named)))
	}
	loops := "loops"
	if n == 1 {
		loops = "loop"
	}
	return fmt.Sprintf("the tree term put %d %s of other trees first: %s (%s)", n, loops, strings.Join(named, ", "), here)
}
