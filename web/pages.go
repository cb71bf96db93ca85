package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/transcript"
)

// Bounds on what a page shows.
const (
	maxRows        = 500 // rows of the tree
	recentFinished = 24 * time.Hour
	outputBytes    = 64 << 10  // tail of the agent output
	maxDiffLines   = 3000      // diff lines rendered; the rest is counted
	maxDiffBytes   = 256 << 10 // and their bytes: a diff may hold 16 MiB
	maxLineBytes   = 2000      // of one diff line (a minified file's); cut with "…"
	maxDepthClass  = 6
	prioTTL        = 2 * time.Second
	callTimeout    = 15 * time.Second
)

var funcs = template.FuncMap{
	"usd":   func(f float64) string { return fmt.Sprintf("$%.2f", f) },
	"ago":   ago,
	"short": func(id string) string { return id[max(0, len(id)-6):] },
	"depth": func(d int) int { return min(d, maxDepthClass) },
	"list":  func(a ...any) []any { return a },
}

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// row is one loop of the tree.
type row struct {
	loop.Loop
	Priority string // the scheduler's, for a waiting loop; "" otherwise
}

// rowOf is l's row, with its priority from prio while it waits to run.
func rowOf(l loop.Loop, prio map[string]string) row {
	r := row{Loop: l}
	if l.Status == loop.Pending {
		r.Priority = prio[l.ID]
	}
	return r
}

// inbox is the NEEDS YOU section.
type inbox struct {
	Needs   []need
	Approve []api.Approval // plans awaiting approval
	Review  []api.Approval // tasks awaiting review
}

// need is a loop in needs_human and the form that answers it.
type need struct {
	api.NeedsYou
	Budget string // the loop whose budget to raise, for reason budget
}

func (b inbox) Len() int { return len(b.Needs) + len(b.Approve) + len(b.Review) }

// key identifies what the inbox holds, so the stream sends it again only
// when that changes.
func (b inbox) key() string {
	var k strings.Builder
	for _, n := range b.Needs {
		k.WriteString(n.ID + string(n.Reason) + n.Detail + ";")
	}
	for _, a := range b.Approve {
		k.WriteString("a" + a.ID + ";")
	}
	for _, a := range b.Review {
		k.WriteString("r" + a.ID + ";")
	}
	return k.String()
}

func inboxOf(st api.Status) inbox {
	b := inbox{Approve: st.AwaitingApproval, Review: st.AwaitingReview}
	for _, n := range st.NeedsYou {
		nd := need{NeedsYou: n}
		if n.Reason == loop.NeedsBudget {
			// loopr budget <holder> --usd N
			if f := strings.Fields(n.Action); len(f) > 2 && f[1] == "budget" {
				nd.Budget = f[2]
			}
		}
		b.Needs = append(b.Needs, nd)
	}
	return b
}

// counts is the header's summary.
type counts struct {
	Running, Pending, Needs, Done, Failed int
}

func countsOf(st api.Status) counts {
	c := st.Counts
	return counts{Running: c[loop.Running] + c[loop.Merging], Pending: c[loop.Pending],
		Needs: c[loop.NeedsHuman] + c[loop.AwaitingApproval] + c[loop.AwaitingReview],
		Done:  c[loop.Complete], Failed: c[loop.Failed]}
}

type indexView struct {
	Counts counts
	Inbox  inbox
	Rows   []row
	More   int // rows not shown
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	be, err := s.backend(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err.Error())
		return
	}
	st, err := be.Status(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err.Error())
		return
	}
	rows, more, err := s.tree(ctx, be)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err.Error())
		return
	}
	s.render(w, http.StatusOK, "index", indexView{Counts: countsOf(st), Inbox: inboxOf(st), Rows: rows, More: more})
}

// tree lists the loops the event stream's snapshot holds (live, or
// finished in the last day) in tree order.
func (s *Server) tree(ctx context.Context, be Backend) ([]row, int, error) {
	all, err := be.List(ctx, api.ListRequest{})
	if err != nil {
		return nil, 0, err
	}
	rows, more := treeRows(all, s.o.Now(), s.priorities(ctx, be))
	return rows, more, nil
}

// treeRows orders the loops that are live or finished in the last day
// as a tree: each after its parent, siblings in id (creation) order; a
// loop whose parent is not shown is a root. At most maxRows; more counts
// the rest.
func treeRows(all []loop.Loop, now time.Time, prio map[string]string) (rows []row, more int) {
	shown := map[string]bool{}
	var keep []loop.Loop
	for _, l := range all {
		if !l.Status.Terminal() || now.Sub(l.FinishedAt) < recentFinished {
			keep = append(keep, l)
			shown[l.ID] = true
		}
	}
	kids := map[string][]loop.Loop{}
	for _, l := range keep {
		p := l.Parent
		if !shown[p] {
			p = ""
		}
		kids[p] = append(kids[p], l)
	}
	var walk func(id string)
	walk = func(id string) {
		ks := kids[id]
		slices.SortFunc(ks, func(a, b loop.Loop) int { return cmp.Compare(a.ID, b.ID) })
		for _, l := range ks {
			rows = append(rows, rowOf(l, prio))
			walk(l.ID)
		}
	}
	walk("")
	more = max(0, len(rows)-maxRows)
	return rows[:min(len(rows), maxRows)], more
}

// prioCache holds the scheduler's priorities for a short while: the
// stream renders a row per event and must not ask for a plan each time.
type prioCache struct {
	mu  sync.Mutex
	at  time.Time
	ids map[string]string
}

// priorities maps the waiting loops to their priority ("" for the rest).
func (s *Server) priorities(ctx context.Context, be Backend) map[string]string {
	c := &s.prio
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.o.Now()
	if c.ids != nil && now.Sub(c.at) < prioTTL {
		return c.ids
	}
	v, err := be.Scheduler(ctx, now)
	if err != nil {
		s.o.Log.Debug("web: scheduler view", "err", err)
		return c.ids
	}
	c.ids, c.at = make(map[string]string, len(v.Rows)), now
	for _, r := range v.Rows {
		c.ids[r.ID] = fmt.Sprint(r.Priority)
	}
	return c.ids
}

// loopView is a loop's page.
type loopView struct {
	Row      row
	Why      *api.Why
	WhyErr   string
	Output   []outLine
	OutErr   string
	Diff     *diffView
	DiffErr  string
	Children []loop.Loop // at most maxRows
	MoreKids int         // children not shown
	Budget   string      // the loop whose budget to raise (needs_human, budget)
}

// outLine is a line of rendered agent output.
type outLine struct {
	Class string
	Text  string
}

var kindClass = map[transcript.Kind]string{transcript.Raw: "raw", transcript.Text: "text", transcript.Thinking: "think",
	transcript.Tool: "tool", transcript.Output: "out", transcript.More: "more", transcript.Error: "err",
	transcript.Info: "info", transcript.Done: "done"}

type diffView struct {
	api.Diff
	Lines []diffLine
	More  int
}

type diffLine struct {
	Class string
	Text  string
}

func (s *Server) loopPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	id := r.PathValue("id")
	be, err := s.backend(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err.Error())
		return
	}
	l, err := be.Get(ctx, id)
	if err != nil {
		s.fail(w, statusOf(err), err.Error())
		return
	}
	v := loopView{Row: rowOf(l, s.priorities(ctx, be))}
	if l.Status == loop.NeedsHuman && l.Needs != nil && l.Needs.Reason == loop.NeedsBudget {
		if f := strings.Fields(l.NeedsAction()); len(f) > 2 {
			v.Budget = f[2]
		}
	}
	if why, err := be.Why(ctx, id, s.o.Now()); err != nil {
		v.WhyErr = err.Error()
	} else {
		v.Why = &why
	}
	if out, err := be.Output(ctx, id, outputBytes); err != nil {
		v.OutErr = err.Error()
	} else {
		for _, ln := range transcript.Render("", []byte(out)) {
			v.Output = append(v.Output, outLine{Class: kindClass[ln.Kind], Text: ln.String()})
		}
	}
	if d, err := be.Diff(ctx, id); err != nil {
		v.DiffErr = err.Error()
	} else {
		v.Diff = diffOf(d)
	}
	if kids, err := be.List(ctx, api.ListRequest{Parent: id}); err == nil {
		v.Children, v.MoreKids = kids[:min(len(kids), maxRows)], max(0, len(kids)-maxRows)
	}
	s.render(w, http.StatusOK, "loop", v)
}

// diffOf flattens a diff into lines to show, at most maxDiffLines.
func diffOf(d api.Diff) *diffView {
	v := &diffView{Diff: d}
	size := 0
	add := func(class, text string) {
		if len(v.Lines) >= maxDiffLines || size >= maxDiffBytes {
			v.More++
			return
		}
		if n := maxLineBytes; len(text) > n {
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
			text = text[:n] + "…"
		}
		size += len(text)
		v.Lines = append(v.Lines, diffLine{class, text})
	}
	for _, f := range d.Files {
		name := f.Path
		if f.OldPath != "" && f.OldPath != f.Path {
			name = f.OldPath + " → " + f.Path
		}
		add("file", fmt.Sprintf("%s (%s, +%d −%d)", name, f.Status, f.Added, f.Removed))
		if f.Binary {
			add("ctx", "binary file")
		}
		for _, h := range f.Hunks {
			add("hunk", h.Header)
			for _, ln := range h.Lines {
				switch ln.Kind {
				case api.DiffAdd:
					add("add", "+"+ln.Text)
				case api.DiffDel:
					add("del", "-"+ln.Text)
				default:
					add("ctx", " "+ln.Text)
				}
			}
		}
	}
	return v
}

// statusOf is the HTTP status for a backend error: the daemon's own for
// its 4xx answers, 502 for the rest.
func statusOf(err error) int {
	if ae, ok := errors.AsType[*client.APIError](err); ok && ae.Usage() {
		return ae.Status
	}
	return http.StatusBadGateway
}
