package sim

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// Epoch is virtual second 0.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The events of a run.
const (
	Arrive = "arrive"
	Admit  = "admit"
	Done   = "done"
	Expire = "expire"
)

// Event is one line of the timeline. Its JSON form, {"t":3,"event":"admit","id":"a1"},
// is stable; the text form carries more and may change.
type Event struct {
	T     int    `json:"t"`
	Event string `json:"event"`
	ID    string `json:"id"`
	info  string // the rest of the text line
}

// KeyStats summarises the loops of one fairness key (as the scheduler
// keys them: key:, else the root of the loop's tree).
type KeyStats struct {
	Key      string
	Loops    int
	Admitted int
	Expired  int
	Waits    []int // seconds from arrival to admission, per admitted loop in admission order
	DoneAt   []int // completion times, in order
}

// Waiting is a loop still waiting at the end, with the reasons of the last plan.
type Waiting struct {
	ID      string
	Reasons []scheduler.Reason
}

// Result is what a run produced.
type Result struct {
	Until    int // the last second simulated
	Fairness bool
	Events   []Event
	Keys     []KeyStats // by key
	Waiting  []Waiting  // in the last plan's order
}

// Admissions returns the admit events as "T:id" strings, in order: the
// admission order a test compares.
func (r Result) Admissions() []string {
	var out []string
	for _, e := range r.Events {
		if e.Event == Admit {
			out = append(out, strconv.Itoa(e.T)+":"+e.ID)
		}
	}
	return out
}

type status int

const (
	notArrived status = iota
	waiting
	running
	done
	expired
)

type simLoop struct {
	Loop
	rec      *loop.Loop
	root     string // id of the root of its tree; "" for a root
	key      string // fairness key
	st       status
	admitted int // second it was admitted
	finish   int // second it completes
	parent   *simLoop
	kids     []*simLoop
}

// settle marks l's subtree done (rec.SubtreeDoneAt) when l and every loop
// below it are done, and then its parent's, as control.Settle does.
func settle(l *simLoop, now time.Time) {
	for ; l != nil && l.st == done && l.rec.SubtreeDoneAt.IsZero(); l = l.parent {
		for _, k := range l.kids {
			if k.rec.SubtreeDoneAt.IsZero() {
				return
			}
		}
		l.rec.SubtreeDoneAt = now
	}
}

// Run simulates w. It is deterministic: the same workload gives the same result.
func Run(w *Workload) Result {
	pol := control.Policy(w.Config)
	fp := pol.Fairness
	ls := make([]*simLoop, len(w.Loops))
	byID := make(map[string]*simLoop, len(w.Loops))
	lastArrival := 0
	for i, l := range w.Loops {
		rec := &loop.Loop{
			ID: l.ID, Type: l.Type, Status: loop.Pending, Title: l.ID, Iteration: 1, MaxIterations: 1,
			// Loops arriving in the same second are created in file order.
			CreatedAt:   Epoch.Add(time.Duration(l.At)*time.Second + time.Duration(i)),
			FairnessKey: l.Key, ConflictKey: l.ConflictKey, CostHint: l.Cost, Owner: l.Owner, Parent: l.Parent,
		}
		rec.UpdatedAt = rec.CreatedAt
		if l.Deadline > 0 {
			rec.Deadline = Epoch.Add(time.Duration(l.Deadline) * time.Second)
		}
		sl := &simLoop{Loop: l, rec: rec}
		if p := byID[l.Parent]; p != nil { // parents come first in the file
			rec.Depth = p.rec.Depth + 1
			sl.root = p.root
			if sl.root == "" {
				sl.root = p.ID
			}
			// The order between siblings: depends_on, else the parent
			// type's children setting (sequential: the sibling before).
			if !l.DependsSet && len(p.kids) > 0 && w.Config.Loop(p.Type).Children == config.Sequential {
				rec.DependsOn = []string{p.kids[len(p.kids)-1].ID}
			}
			sl.parent, p.kids = p, append(p.kids, sl)
		}
		if l.DependsSet {
			rec.DependsOn = l.DependsOn
		}
		sl.key = scheduler.FairnessKey(rec, sl.root)
		ls[i], byID[l.ID] = sl, sl
		lastArrival = max(lastArrival, l.At)
	}

	// Arrivals in time order (file order within a second), and whether any
	// loop can expire, so that a second costs what happens in it.
	arrivals := slices.Clone(ls)
	slices.SortStableFunc(arrivals, func(a, b *simLoop) int { return a.At - b.At })
	deadlines := slices.ContainsFunc(ls, func(l *simLoop) bool { return l.Deadline > 0 })

	res := Result{Until: w.Until, Fairness: fp.Enabled}
	var (
		fair scheduler.Fairness
		run  []*simLoop // running, in admission order
		last scheduler.Decision
	)
	emit := func(t int, ev, id, info string) {
		res.Events = append(res.Events, Event{T: t, Event: ev, ID: id, info: info})
	}
	for t := 0; ; t++ {
		if w.Until > 0 && t > w.Until || t > maxUntil {
			break
		}
		now := Epoch.Add(time.Duration(t) * time.Second)
		changed := false
		// 1. Arrivals.
		for len(arrivals) > 0 && arrivals[0].At == t {
			l := arrivals[0]
			arrivals = arrivals[1:]
			l.st, changed = waiting, true
			emit(t, Arrive, l.ID, l.Type)
		}
		// 2. Completions.
		kept := run[:0]
		for _, l := range run {
			if l.finish > t {
				kept = append(kept, l)
				continue
			}
			l.st, l.rec.Status, changed = done, loop.Complete, true
			settle(l, now)
			emit(t, Done, l.ID, "")
			if fp.Enabled {
				fair.Evict(now, fp.IdleTTL)
				fair.Observe(l.Type, l.key, time.Duration(l.Duration)*time.Second, now, fp)
			}
		}
		run = kept
		// 3. Loops past their deadline expire (the manager's sweep).
		for _, l := range ls {
			if !deadlines {
				break
			}
			if l.st == waiting && l.Deadline > 0 && t >= l.Deadline {
				l.st, l.rec.Status, changed = expired, loop.Expired, true
				emit(t, Expire, l.ID, fmt.Sprintf("deadline %d", l.Deadline))
			}
		}
		// 4. Admissions until nothing more is admissible: one plan admits
		// all it can (an admission only tightens the gates of the loops after
		// it, so planning again would admit nothing), and nothing more is
		// admissible until an arrival, a completion or an expiry.
		admitted := false
		if changed {
			last = scheduler.Plan(snapshot(ls, run, byID, fair), now, pol)
			rows := map[string]*scheduler.Row{}
			for i := range last.Rows {
				if last.Rows[i].Runnable {
					rows[last.Rows[i].Loop.ID] = &last.Rows[i]
				}
			}
			for _, id := range last.Start {
				l := byID[id]
				l.st, l.rec.Status, l.admitted, l.finish = running, loop.Running, t, t+l.Duration
				run = append(run, l)
				emit(t, Admit, id, admitText(l, rows[id], len(run), pol.MaxLoops))
				admitted = true
			}
			if fp.Enabled {
				fair.Record(last.Charges, now, fp)
			}
		}
		if w.Until == 0 && t >= lastArrival && len(run) == 0 && !admitted {
			res.Until = t
			break
		}
		res.Until = t
	}

	// Summary by key, and what still waits.
	stats := map[string]*KeyStats{}
	for _, l := range ls {
		ks := stats[l.key]
		if ks == nil {
			ks = &KeyStats{Key: l.key}
			stats[l.key] = ks
		}
		ks.Loops++
		if l.st == expired {
			ks.Expired++
		}
	}
	for _, e := range res.Events {
		l := byID[e.ID]
		ks := stats[l.key]
		switch e.Event {
		case Admit:
			ks.Admitted++
			ks.Waits = append(ks.Waits, e.T-l.At)
		case Done:
			ks.DoneAt = append(ks.DoneAt, e.T)
		}
	}
	for _, k := range slicesSortedKeys(stats) {
		res.Keys = append(res.Keys, *stats[k])
	}
	for _, r := range last.Rows {
		if l := byID[r.Loop.ID]; l.st == waiting {
			res.Waiting = append(res.Waiting, Waiting{ID: l.ID, Reasons: r.Reasons})
		}
	}
	return res
}

// snapshot is what the daemon's control.Snapshot would read: the waiting
// loops with their parents' statuses, roots and dependencies, the running loops.
func snapshot(ls []*simLoop, run []*simLoop, byID map[string]*simLoop, fair scheduler.Fairness) scheduler.Snapshot {
	s := scheduler.Snapshot{Running: map[string]int{}, Fairness: fair}
	for _, l := range ls {
		if l.st != waiting {
			continue
		}
		c := scheduler.Candidate{Loop: l.rec, Root: l.root}
		if p := byID[l.Parent]; p != nil {
			c.ParentStatus = p.rec.Status
		}
		for _, d := range l.rec.DependsOn {
			c.Deps = append(c.Deps, scheduler.DepOf(d, byID[d].rec))
		}
		s.Waiting = append(s.Waiting, c)
	}
	for _, l := range run {
		s.Running[l.Type]++
		s.Active = append(s.Active, l.rec)
	}
	return s
}

// admitText is the rest of an ADMIT line: type, priority, tier, fairness.
func admitText(l *simLoop, r *scheduler.Row, running, maxLoops int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s prio=%d", l.Type, r.Score.Priority)
	if r.Tier > 0 {
		fmt.Fprintf(&b, " tier=%d", r.Tier)
	}
	if r.Key != "" {
		fmt.Fprintf(&b, " key=%s cost=%s used=%s", r.Key, num(r.Cost), num(r.KeyUsed+r.Cost))
	}
	if l.ConflictKey != "" {
		fmt.Fprintf(&b, " conflict_key=%s", l.ConflictKey)
	}
	fmt.Fprintf(&b, " running=%d/%d", running, maxLoops)
	return b.String()
}

// num formats a cost: integers without decimals, others with one.
func num(f float64) string {
	if f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

func slicesSortedKeys(m map[string]*KeyStats) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WriteJSON writes the events as a JSON array, one event per line:
// [{"t":3,"event":"admit","id":"a1"}, …].
func (r Result) WriteJSON(w io.Writer) error {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range r.Events {
		if i > 0 {
			b.WriteString(",")
		}
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b.WriteString("\n  ")
		b.Write(line)
	}
	b.WriteString("\n]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes the timeline, a summary per key and what still waits.
func (r Result) WriteText(w io.Writer) error {
	var b strings.Builder
	width := 0
	for _, e := range r.Events {
		width = max(width, len(e.ID))
	}
	for _, e := range r.Events {
		line := fmt.Sprintf("T=%3d %-6s %-*s %s", e.T, strings.ToUpper(e.Event), width, e.ID, e.info)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	fmt.Fprintf(&b, "\nsimulated 0..%d s; fairness %s\n\n", r.Until, map[bool]string{true: "on", false: "off"}[r.Fairness])
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tLOOPS\tADMITTED\tDONE\tWAIT AVG\tWAIT MAX\tDONE AT")
	for _, k := range r.Keys {
		avg, mx := "-", "-"
		if len(k.Waits) > 0 {
			sum, m := 0, 0
			for _, x := range k.Waits {
				sum += x
				m = max(m, x)
			}
			avg, mx = num(float64(sum)/float64(len(k.Waits))), strconv.Itoa(m)
		}
		doneAt := "-"
		if len(k.DoneAt) > 0 {
			parts := make([]string, len(k.DoneAt))
			for i, t := range k.DoneAt {
				parts[i] = strconv.Itoa(t)
			}
			if len(parts) > 12 { // the first and last five
				parts = append(append(parts[:5:5], "…"), parts[len(parts)-5:]...)
			}
			doneAt = strings.Join(parts, " ")
		}
		admitted := strconv.Itoa(k.Admitted)
		if k.Expired > 0 {
			admitted += fmt.Sprintf(" (%d expired)", k.Expired)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", k.Key, k.Loops, admitted, len(k.DoneAt), avg, mx, doneAt)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Waiting) > 0 {
		fmt.Fprintf(&b, "\nstill waiting at T=%d:\n", r.Until)
		for _, wt := range r.Waiting {
			texts := make([]string, len(wt.Reasons))
			for i, re := range wt.Reasons {
				texts[i] = re.Text
			}
			fmt.Fprintf(&b, "  %s: %s\n", wt.ID, strings.Join(texts, "; "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
