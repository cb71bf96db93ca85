package control

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/fanout"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// MaxTaskBytes bounds the task text of a loop.
const MaxTaskBytes = 256 << 10

// MaxAnswerBytes bounds a person's answer (`loopr answer`).
const MaxAnswerBytes = 64 << 10

// NewLoop validates req against the configuration and returns the record it
// describes, without storing it. parent is the parent record when req names one.
func (s *Service) NewLoop(req api.CreateRequest, parent *loop.Loop, now time.Time) (loop.Loop, error) {
	c := s.cfg()
	if req.Type == "" {
		return loop.Loop{}, Invalid("--type", "required (one of %s)", strings.Join(c.Types(), ", "))
	}
	if !c.KnownType(req.Type) {
		return loop.Loop{}, Invalid("--type", "unknown type %q (known: %s)", req.Type, strings.Join(c.Types(), ", "))
	}
	if len(req.Task) > MaxTaskBytes {
		return loop.Loop{}, Invalid("--task", "too long (%d bytes, max %d)", len(req.Task), MaxTaskBytes)
	}
	if req.MaxIterations < 0 {
		return loop.Loop{}, Invalid("--max-iterations", "must be > 0")
	}
	if req.CostHint < 0 {
		return loop.Loop{}, Invalid("cost_hint", "must be >= 0")
	}
	if req.Agent != "" {
		if _, ok := c.Profile(req.Agent); !ok {
			return loop.Loop{}, Invalid("--agent", "unknown agent profile %q (known: %s)", req.Agent, strings.Join(c.Profiles(), ", "))
		}
	}
	if err := s.checkFanout(req.Type, req.Fanout, req.Agents, "--fanout", "--agents"); err != nil {
		return loop.Loop{}, err
	}
	if len(req.DependsOn) > loop.MaxDependsOn {
		return loop.Loop{}, Invalid("--after", "%d loops: at most %d", len(req.DependsOn), loop.MaxDependsOn)
	}
	for _, d := range req.DependsOn {
		if !loop.ValidID(d) {
			return loop.Loop{}, Invalid("--after", "%q is not a loop id", d)
		}
	}
	if b := req.Budget; math.IsNaN(b.USD) || math.IsInf(b.USD, 0) || b.USD < 0 {
		return loop.Loop{}, Invalid("--budget-usd", "must be a number >= 0")
	} else if b.Tokens < 0 {
		return loop.Loop{}, Invalid("--budget-tokens", "must be >= 0")
	}
	l := loop.Loop{
		ID: NewID(now), Type: req.Type, Status: loop.Pending,
		Task: strings.TrimSpace(req.Task), Title: strings.TrimSpace(req.Title),
		Iteration: 1, MaxIterations: req.MaxIterations,
		CreatedAt: now, UpdatedAt: now,
		RunnableAt: req.RunnableAt.UTC(), Deadline: req.Deadline.UTC(),
		FairnessKey: req.FairnessKey, ConflictKey: req.ConflictKey, CostHint: req.CostHint, Owner: req.Owner,
		Agent: req.Agent, Budget: req.Budget, Review: req.Review,
	}
	for _, d := range req.DependsOn {
		if !slices.Contains(l.DependsOn, d) {
			l.DependsOn = append(l.DependsOn, d)
		}
	}
	if l.Budget == (loop.Budget{}) {
		l.Budget = c.BudgetFor(l.Type, parent == nil)
	}
	if l.Title == "" {
		l.Title = titleFrom(l.Task)
	}
	if l.Title == "" {
		return loop.Loop{}, Invalid("--task", "a loop needs a task or a title")
	}
	if l.MaxIterations == 0 {
		l.MaxIterations = c.Loop(l.Type).MaxIterations
	}
	if parent != nil {
		l.Parent = parent.ID
		l.Depth = parent.Depth + 1
	}
	return l, nil
}

// Create stores a new loop.
func (s *Service) Create(req api.CreateRequest) (loop.Loop, error) {
	now := s.Now()
	var out loop.Loop
	err := s.Store.Update(func(tx *store.Tx) (err error) {
		out, err = s.CreateIn(tx, req, now)
		return err
	})
	return out, err
}

// CreateIn validates req and stores the loop in tx: the one way a loop is
// created from a request (POST /v1/loops and every item of a batch), so
// admission checks live here.
func (s *Service) CreateIn(tx *store.Tx, req api.CreateRequest, now time.Time) (loop.Loop, error) {
	var parent *loop.Loop
	if req.Parent != "" {
		p, err := tx.Get(req.Parent)
		if err != nil {
			return loop.Loop{}, fmt.Errorf("--parent: %w", err)
		}
		parent = &p
	}
	l, err := s.NewLoop(req, parent, now)
	if err != nil {
		return loop.Loop{}, err
	}
	if err := dependencies(tx, l.DependsOn, now); err != nil {
		return loop.Loop{}, err
	}
	if err := notOnAncestor(tx, parent, l.DependsOn); err != nil {
		return loop.Loop{}, err
	}
	if err := s.admit(tx, l.Owner); err != nil {
		return loop.Loop{}, err
	}
	if parent != nil {
		// A loop added below a finished subtree: not done any more.
		if err := unsettle(tx, *parent); err != nil {
			s.unadmit(tx, l.Owner)
			return loop.Loop{}, err
		}
	}
	if err := s.noteBudget(tx, l.Budget); err != nil {
		return loop.Loop{}, err
	}
	if n := s.fanoutN(l.Type, req.Fanout, req.Agents); n > 1 {
		return s.createFanout(tx, req, l, n, now)
	}
	l.Agent = cmp.Or(fanout.Agents(req.Agents, 1), l.Agent) // one candidate: on the first profile, as in a group
	if err := tx.Create(l); err != nil {
		s.unadmit(tx, l.Owner)
		return loop.Loop{}, err
	}
	return l, nil
}

// dependencies checks, in tx, that every loop of ids exists. A finished
// one that does not say whether its subtree is done (a record from before
// subtree_done_at) is looked into and marked when it is.
func dependencies(tx *store.Tx, ids []string, now time.Time) error {
	for _, id := range ids {
		d, err := tx.Get(id)
		if errors.Is(err, store.ErrNotFound) {
			return Invalid("--after", "no loop %s (give the id of an existing loop, or a unique prefix of one)", id)
		}
		if err != nil {
			return err
		}
		if d.Status.Settled() && d.SubtreeDoneAt.IsZero() {
			if _, _, err := settle(tx, &d, now, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// notOnAncestor refuses a dependency on the new loop's parent or any loop
// above it: an ancestor is done only when its whole subtree is, the new
// loop included, so the loop would wait forever.
func notOnAncestor(tx *store.Tx, parent *loop.Loop, deps []string) error {
	if parent == nil || len(deps) == 0 {
		return nil
	}
	for a, hops := *parent, 0; hops < 1000; hops++ {
		if slices.Contains(deps, a.ID) {
			return Invalid("--after", "%s is above the new loop in its tree: it is done only once its whole subtree is, this loop included, so the loop would wait forever; name a sibling or another tree's loop", a.ID)
		}
		if a.Parent == "" {
			return nil
		}
		next, err := tx.Get(a.Parent)
		if err != nil {
			return nil // an orphan's missing parent: nothing above to wait for
		}
		a = next
	}
	return nil
}

// Get returns one loop.
func (s *Service) Get(id string) (loop.Loop, error) {
	var l loop.Loop
	err := s.Store.View(func(tx *store.Tx) (err error) {
		l, err = tx.Get(id)
		return err
	})
	return l, err
}

// List returns loops matching req in id (creation) order.
func (s *Service) List(req api.ListRequest) ([]loop.Loop, error) {
	for _, st := range req.Status {
		if !st.Valid() {
			return nil, Invalid("--status", "unknown status %q (known: %s)", st, statusNames())
		}
	}
	if req.Type != "" && !s.cfg().KnownType(req.Type) {
		return nil, Invalid("--type", "unknown type %q (known: %s)", req.Type, strings.Join(s.cfg().Types(), ", "))
	}
	if req.Prefix != "" || req.Suffix != "" { // enough to resolve a prefix or short id (Match), not a listing
		return s.byPrefixFilter(req)
	}
	return s.Store.List(store.Filter{Statuses: req.Status, Type: req.Type, Parent: req.Parent})
}

func statusNames() string {
	names := make([]string, len(loop.Statuses))
	for i, st := range loop.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// Act applies a user action to a loop and returns the result. The daemon
// stops the agents of every affected loop that was running.
func (s *Service) Act(id, action string, req api.ActionRequest) (api.ActionResult, error) {
	if !slices.Contains(api.Actions, action) {
		return api.ActionResult{}, Invalid("action", "unknown action %q (known: %s)", action, strings.Join(api.Actions, ", "))
	}
	if action == api.ActionIterate && strings.TrimSpace(req.Feedback) == "" {
		return api.ActionResult{}, Invalid("--feedback", "required: tell the agent what to change")
	}
	if action == api.ActionIterate && len(req.Feedback) > MaxAnswerBytes {
		return api.ActionResult{}, Invalid("--feedback", "too long (%d bytes, max %d)", len(req.Feedback), MaxAnswerBytes)
	}
	if len(req.Reason) > MaxAnswerBytes {
		return api.ActionResult{}, Invalid("--reason", "too long (%d bytes, max %d)", len(req.Reason), MaxAnswerBytes)
	}
	if action == api.ActionAnswer && len(req.Answer) > MaxAnswerBytes {
		return api.ActionResult{}, Invalid("answer", "too long (%d bytes, max %d)", len(req.Answer), MaxAnswerBytes)
	}
	// Approve reads the accepted artifact before the write transaction:
	// no file I/O is done inside one (a slow or hostile file would hold
	// every other write behind it).
	var accepted *acceptedArtifact
	git := false // a cancel may finish a tree: its tree_complete names the plan's branch
	if action == api.ActionCancel || action == api.ActionApprove {
		git = s.NoGit() == ""
	}
	if action == api.ActionApprove {
		a, err := s.readAccepted(id)
		if err != nil {
			return api.ActionResult{}, err
		}
		accepted = a
	}
	now := s.Now()
	var res api.ActionResult
	var cur loop.Loop // the loop as the transaction found it, to explain a refusal
	err := s.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		cur = l
		var affected []string
		switch action {
		case api.ActionCancel:
			reason := req.Reason
			if reason == "" {
				reason = "cancelled by user"
			}
			affected, err = CancelTree(tx, l, reason, now, git)
		case api.ActionReset:
			if l.Status != loop.Failed {
				return &loop.TransitionError{ID: id, From: l.Status, To: loop.Pending}
			}
			err = s.move(tx, l, loop.Pending, now, "reset by user", func(n *loop.Loop) {
				n.Iteration, n.Reason, n.RunnableAt = 1, "", time.Time{}
				n.RateLimitStreak, n.TransientRetries = 0, 0
				n.Session = nil // a fresh start: the next run does not resume the agent's session
			})
		case api.ActionPause:
			err = s.move(tx, l, loop.Paused, now, "paused by user", nil)
		case api.ActionResume:
			if l.Status != loop.Paused {
				return &loop.TransitionError{ID: id, From: l.Status, To: loop.Pending}
			}
			err = s.move(tx, l, loop.Pending, now, "resumed by user", nil)
		case api.ActionApprove:
			if l.Status == loop.AwaitingReview {
				err = ApproveReview(tx, l, now, git)
				break
			}
			if l.Status != loop.AwaitingApproval {
				return &loop.TransitionError{ID: id, From: l.Status, To: loop.Complete}
			}
			if accepted == nil || accepted.path != l.Artifact { // iterated and passed again meanwhile
				return &ActionError{Action: action, Loop: l, Err: &loop.TransitionError{ID: id, From: l.Status, To: loop.Complete},
					Msg: fmt.Sprintf("%s: its plan changed while you were approving it; look again (loopr show %s --artifact) and retry", l.ID, l.ID)}
			}
			affected, err = s.Approve(tx, l, accepted.doc, now)
		case api.ActionReject:
			if !l.Status.AwaitsPerson() {
				return &loop.TransitionError{ID: id, From: l.Status, To: loop.Failed}
			}
			reason := req.Reason
			if reason == "" {
				reason = "rejected by user"
			}
			err = s.move(tx, l, loop.Failed, now, reason, func(n *loop.Loop) { n.Reason = reason })
		case api.ActionIterate:
			switch l.Status {
			case loop.AwaitingApproval:
				affected, err = s.Iterate(tx, l, req.Feedback, now)
			case loop.AwaitingReview:
				err = IterateReview(tx, l, req.Feedback, now)
			default:
				return &loop.TransitionError{ID: id, From: l.Status, To: loop.Pending}
			}
		case api.ActionAnswer:
			if err = s.limitHeld(tx, l, now); err == nil {
				err = Answer(tx, l, req.Answer, now)
			}
		}
		if err != nil {
			return err
		}
		res.Loop, err = tx.Get(id)
		res.Affected = affected
		return err
	})
	return res, explainAction(action, cur, err)
}

// move transitions l to status to, applies edit, and writes the record and
// its event in tx.
func (s *Service) move(tx *store.Tx, l loop.Loop, to loop.Status, now time.Time, msg string, edit func(*loop.Loop)) error {
	return Move(tx, l, to, now, msg, edit)
}

// Move is the one way every package changes a loop's status: the pure
// transition, the caller's edits, the record and its event in tx.
func Move(tx *store.Tx, l loop.Loop, to loop.Status, now time.Time, msg string, edit func(*loop.Loop)) error {
	n, err := loop.Transition(l, to, now)
	if err != nil {
		return err
	}
	if edit != nil {
		edit(&n)
	}
	if err := tx.Put(n); err != nil {
		return err
	}
	_, err = tx.AppendEvent(loop.TransitionEvent(l, n, msg))
	return err
}

// Descendants returns every descendant of id, parents before children.
func Descendants(tx *store.Tx, id string) ([]loop.Loop, error) {
	var out []loop.Loop
	queue := []string{id}
	for len(queue) > 0 {
		kids, err := tx.Children(queue[0])
		if err != nil {
			return nil, err
		}
		queue = queue[1:]
		for _, k := range kids {
			out = append(out, k)
			queue = append(queue, k.ID)
		}
	}
	return out, nil
}

// CancelTree cancels l and every descendant that can still be cancelled,
// in one transaction, and returns the ids it changed (l first when it
// changed). A loop that already finished (a complete plan whose specs
// still run) keeps its status while everything live below it is
// cancelled; only when nothing at all can be cancelled is it a
// *loop.TransitionError. Like a completion, a cancel may finish a subtree
// and a tree (Settle: git says whether tree_complete names a branch).
func CancelTree(tx *store.Tx, l loop.Loop, reason string, now time.Time, git bool) ([]string, error) {
	desc, err := Descendants(tx, l.ID)
	if err != nil {
		return nil, err
	}
	if !loop.CanTransition(l.Status, loop.Cancelled) && !slices.ContainsFunc(desc, func(d loop.Loop) bool {
		return loop.CanTransition(d.Status, loop.Cancelled)
	}) {
		return nil, &loop.TransitionError{ID: l.ID, From: l.Status, To: loop.Cancelled}
	}
	var changed []string
	for _, d := range append([]loop.Loop{l}, desc...) {
		if !loop.CanTransition(d.Status, loop.Cancelled) {
			continue
		}
		why := reason
		if d.ID != l.ID {
			why = fmt.Sprintf("%s (ancestor %s cancelled)", reason, l.ID)
		}
		if err := Move(tx, d, loop.Cancelled, now, why, func(n *loop.Loop) { n.Reason = why }); err != nil {
			return nil, err
		}
		changed = append(changed, d.ID)
	}
	return changed, Settle(tx, l.ID, now, git)
}

// InvalidateSubtree marks every non-final descendant of id invalidated with
// reason, and returns the ids it changed.
func InvalidateSubtree(tx *store.Tx, id, reason string, now time.Time) ([]string, error) {
	desc, err := Descendants(tx, id)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, d := range desc {
		if !loop.CanTransition(d.Status, loop.Invalidated) {
			continue
		}
		if err := Move(tx, d, loop.Invalidated, now, reason, func(n *loop.Loop) { n.Reason = reason }); err != nil {
			return nil, err
		}
		changed = append(changed, d.ID)
	}
	return changed, nil
}

// acceptedArtifact is a plan's accepted artifact, read and parsed.
type acceptedArtifact struct {
	path string
	doc  artifact.Doc
}

// readAccepted reads the accepted artifact of loop id when it awaits
// approval (nil otherwise: the transaction then reports the state). The
// runner copied the artifact it validated out of the agent's reach, so
// this is what was validated; it is read as a regular file only.
func (s *Service) readAccepted(id string) (*acceptedArtifact, error) {
	l, err := s.Store.Get(id)
	if err != nil || l.Status != loop.AwaitingApproval {
		return nil, nil // the transaction reports a missing loop or a wrong state
	}
	if l.Artifact == "" {
		return nil, Invalid("artifact", "loop %s has no artifact to approve; iterate or reject it", id)
	}
	// Under the home, no symlink may lead the read elsewhere; a plan that
	// passed on another machine is read from the store's copy.
	data, err := s.ReadArtifact(l.Artifact)
	var nr *safefile.NotRegularError
	var tl *safefile.TooLargeError
	switch {
	case errors.As(err, &nr), errors.As(err, &tl), errors.Is(err, fs.ErrNotExist):
		return nil, Invalid("artifact", "%v; iterate or reject loop %s", err, id) // 400 with the reason, not a 500
	case err != nil:
		return nil, fmt.Errorf("approve %s: artifact: %w", l.ID, err)
	}
	doc, err := artifact.Parse(l.Type, data)
	if err != nil {
		return nil, Invalid("artifact", "%s: %v; iterate or reject loop %s", l.Artifact, err, id)
	}
	return &acceptedArtifact{path: l.Artifact, doc: doc}, nil
}

// Approve completes a plan awaiting approval and spawns its children from
// doc, its accepted artifact read before the transaction, all in tx. It
// returns the new children's ids.
func (s *Service) Approve(tx *store.Tx, l loop.Loop, doc artifact.Doc, now time.Time) ([]string, error) {
	if err := Move(tx, l, loop.Complete, now, "approved by user", nil); err != nil {
		return nil, err
	}
	l.Status = loop.Complete
	return s.SpawnChildren(tx, l, doc, l.Artifact, now)
}

// Iterate sends a plan awaiting approval back for another iteration with
// the user's feedback, invalidating any children of its old artifact.
func (s *Service) Iterate(tx *store.Tx, l loop.Loop, feedback string, now time.Time) ([]string, error) {
	changed, err := InvalidateSubtree(tx, l.ID, fmt.Sprintf("parent %s re-iterated", l.ID), now)
	if err != nil {
		return nil, err
	}
	err = Move(tx, l, loop.Pending, now, "iterate requested by user", func(n *loop.Loop) {
		n.Iteration++
		if n.Iteration > n.MaxIterations {
			n.MaxIterations = n.Iteration
		}
		n.Feedback = "Reviewer feedback on the previous plan:\n" + strings.TrimSpace(feedback)
		n.Artifact = ""
		n.RunnableAt = time.Time{}
	})
	if err != nil {
		return changed, err
	}
	return changed, DropArtifact(tx, s.Store, l.Artifact, "")
}

// Answer releases a loop that needs a person: back to pending with text
// as the answer its next prompt carries. A loop parked by a failure that
// spent its iteration (no_progress, stalled) gets the next iteration, and
// room for it past max_iterations; one that asked a question, or waited
// for a limit or a budget raised since, runs the same iteration again. A
// loop whose budget is still spent, whatever it waits for, is refused with
// an *ActionError naming `loopr budget`: answered, it would wait behind the
// budget gate, out of "Needs you".
func Answer(tx *store.Tx, l loop.Loop, text string, now time.Time) error {
	if l.Status != loop.NeedsHuman {
		return &notWaitingError{st: l.Status, te: &loop.TransitionError{ID: l.ID, From: l.Status, To: loop.Pending}}
	}
	var reason loop.NeedsReason
	if l.Needs != nil {
		reason = l.Needs.Reason
	}
	spentText, spent, err := budgetHeld(tx, l)
	if err != nil {
		return err
	}
	if spent { // pending again, the budget gate would hold it, out of sight
		held := l
		held.Needs = &loop.Needs{Reason: loop.NeedsBudget, Detail: spentText}
		msg := fmt.Sprintf("%s: %s; an answer would leave this %s behind the same gate — raise the budget with %s and it resumes",
			l.ID, spentText, l.Type, held.NeedsAction())
		if reason != loop.NeedsBudget {
			msg = fmt.Sprintf("%s: %s; answered, this %s would wait behind the budget gate, out of Needs you — raise the budget with %s first, then answer",
				l.ID, spentText, l.Type, held.NeedsAction())
		}
		return &ActionError{Action: api.ActionAnswer, Loop: l, Err: &loop.TransitionError{ID: l.ID, From: l.Status, To: loop.Pending}, Msg: msg}
	}
	msg := "answered by user"
	if reason != "" {
		msg += " (" + string(reason) + ")"
	}
	return Move(tx, l, loop.Pending, now, msg, func(n *loop.Loop) {
		if reason == loop.NeedsNoProgress || reason == loop.NeedsStalled {
			n.Iteration++
			n.MaxIterations = max(n.MaxIterations, n.Iteration)
		}
		n.Needs, n.Answer, n.Reason = nil, strings.TrimSpace(text), ""
		n.Stalls, n.FailureFingerprint, n.FailureRepeats = 0, "", 0
		n.RunnableAt = time.Time{}
	})
}

// notWaitingError refuses an answer to a loop that does not wait for one;
// it is a *loop.TransitionError (a conflict) with a message that says so.
type notWaitingError struct {
	st loop.Status
	te *loop.TransitionError
}

func (e *notWaitingError) Error() string {
	return fmt.Sprintf("answer %s: it is %s; only a loop that needs you (status needs_human) takes an answer", e.te.ID, e.st)
}

func (e *notWaitingError) Unwrap() error { return e.te }

// SpawnChildren creates one child loop per section of doc under parent, in
// tx, with triggered_by = artifactPath and depends_on from the section's
// **Depends on:** line or, without one, the parent type's children
// setting (sequential: each child after the one before it). It returns
// the children's ids.
func (s *Service) SpawnChildren(tx *store.Tx, parent loop.Loop, doc artifact.Doc, artifactPath string, now time.Time) ([]string, error) {
	ct, ok := loop.ChildType(parent.Type)
	if !ok {
		return nil, nil
	}
	ids := make([]string, 0, len(doc.Sections))
	groups := make([][]string, 0, len(doc.Sections)) // each section's loops: one, or a best-of-N group's candidates
	agent := parent.Agent                            // the tree runs on the profile its root chose
	if _, ok := s.cfg().Profile(agent); !ok {
		agent = "" // no longer configured: the type's
	}
	sequential := s.cfg().Loop(parent.Type).Children == config.Sequential
	for i, sec := range doc.Sections {
		req := api.CreateRequest{Type: ct, Task: sec.Text, Title: sec.Name,
			FairnessKey: parent.FairnessKey, Owner: parent.Owner, ConflictKey: sec.ConflictKey, Agent: agent}
		// The order between siblings: the section's **Depends on:** line,
		// else the parent type's children setting.
		switch {
		// A best-of-N group counts as done once each candidate is complete
		// or cancelled (the losers are): its dependents name them all.
		case sec.DependsSet:
			for _, k := range sec.DependsOn {
				req.DependsOn = append(req.DependsOn, groups[k-1]...) // an earlier section's: the parser allows no other
			}
		case sequential && i > 0:
			req.DependsOn = slices.Clone(groups[i-1])
		}
		child, err := s.NewLoop(req, &parent, now)
		if err == nil {
			err = s.checkFanout(ct, sec.Fanout, sec.Agents, "**Fanout:**", "**Agents:**")
		}
		if err != nil {
			return nil, fmt.Errorf("spawn child %d of %s: %w", sec.N, parent.ID, err)
		}
		child.TriggeredBy = artifactPath
		if err := s.noteBudget(tx, child.Budget); err != nil {
			return nil, err
		}
		made := []loop.Loop{child}
		if n := s.fanoutN(ct, sec.Fanout, sec.Agents); n > 1 {
			if made, err = s.createGroup(tx, child, n, sec.Agents, now); err != nil {
				return nil, err
			}
		} else {
			child.Agent = cmp.Or(fanout.Agents(sec.Agents, 1), child.Agent) // one candidate: on the first profile
			if err := tx.Create(child); err != nil {
				return nil, err
			}
			made[0] = child
		}
		var group []string
		for _, c := range made {
			group = append(group, c.ID)
		}
		groups = append(groups, group)
		ids = append(ids, group...)
	}
	return ids, nil
}
