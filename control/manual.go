package control

import (
	"fmt"
	"regexp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

var (
	commitRe = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
	branchRe = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,255}$`)
)

// RecordManual journals, on paused loop id, the work a person did by hand
// (`loopr attach`): at which iteration, and the commit on which branch.
func (s *Service) RecordManual(id string, req api.ManualRequest) error {
	if req.Commit != "" && !commitRe.MatchString(req.Commit) {
		return Invalid("commit", "%q is not a commit id (7-64 hex digits)", req.Commit)
	}
	if req.Branch != "" && !branchRe.MatchString(req.Branch) {
		return Invalid("branch", "%q is not a loop branch name", req.Branch)
	}
	return s.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		if l.Status != loop.Paused {
			return Invalid("loop", "%s is %s: manual work is recorded on a paused loop (loopr attach pauses it)", id, l.Status)
		}
		if req.Iteration != l.Iteration {
			return Invalid("iteration", "%d: %s is at iteration %d", req.Iteration, id, l.Iteration)
		}
		msg := "manual work by loopr attach: nothing changed"
		if req.Commit != "" {
			msg = fmt.Sprintf("manual work by loopr attach: commit %s on %s", req.Commit, req.Branch)
		}
		_, err = tx.AppendEvent(loop.Event{Time: s.Now(), Loop: id, Kind: loop.EventIteration, Iteration: l.Iteration, Message: msg})
		return err
	})
}
