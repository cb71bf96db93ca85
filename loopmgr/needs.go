package loopmgr

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// Stopping early for a person (issue 12): a question from the agent, two
// stalls in a row, or the same failure retry.no_progress_limit times in a
// row put the loop in needs_human instead of spending more iterations.

// stallsToNeeds is how many stalled iterations in a row park a loop.
const stallsToNeeds = 2

// maxNeedsDetail bounds needs.detail.
const maxNeedsDetail = 16 << 10

// failResult records a failed iteration, or parks the loop in needs_human
// when the failure is its second stall in a row or repeats the same failure
// no_progress_limit times, unless it was the last iteration max_iterations
// allows: then the loop is parked (failed) as usual.
func (m *Manager) failResult(id string, iteration int, res runner.Result, now time.Time) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		m.answerComments(&cur, "failed") // finish's goroutine: never the merge queue's
		return m.failIn(tx, cur, res, now)
	})
}

// failIn is failResult inside a transaction, for cur, a loop the caller
// checked is still the one whose iteration failed (running under this
// manager, or merging: the merge queue sends it back).
func (m *Manager) failIn(tx *store.Tx, cur loop.Loop, res runner.Result, now time.Time) error {
	limit := m.cfg().Retry.NoProgressLimit
	if res.Stalled {
		cur.Stalls++
	} else {
		cur.Stalls = 0
	}
	if fp := Fingerprint(res.Reason, res.Feedback); fp == cur.FailureFingerprint {
		cur.FailureRepeats++
	} else {
		cur.FailureFingerprint, cur.FailureRepeats = fp, 1
	}
	fb := boundFeedback(fmt.Sprintf("Iteration %d failed: %s\n%s", cur.Iteration, res.Reason, res.Feedback), cur.Feedback)
	last := cur.Iteration >= cur.MaxIterations // the budget is spent anyway: parked as failed
	// A spent budget says more than a stall or a repeat: the failure is
	// recorded and the budget check that follows puts the loop in
	// needs_human (budget), one question for the person, not two.
	spent, err := m.svc.BudgetSpentFor(tx, cur)
	if err != nil {
		return err
	}
	switch {
	case last, spent:
	case res.Stalled && cur.Stalls >= stallsToNeeds:
		return m.toNeeds(tx, cur, loop.NeedsStalled,
			fmt.Sprintf("%d iterations in a row stalled; last: %s", cur.Stalls, res.Reason), fb, now)
	case limit > 0 && cur.FailureRepeats >= limit:
		return m.toNeeds(tx, cur, loop.NeedsNoProgress,
			fmt.Sprintf("%d iterations in a row failed the same way: %s\n%s", cur.FailureRepeats, res.Reason, res.Feedback), fb, now)
	}
	return m.failLoop(tx, cur, res.Reason, res.Feedback, now)
}

// asked parks the loop with the agent's question, without spending the
// iteration: the answer reruns it.
func (m *Manager) asked(id string, iteration int, question string, now time.Time) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		return m.toNeeds(tx, cur, loop.NeedsQuestion, question, "", now)
	})
}

// toNeeds moves cur to needs_human for reason, with detail (clipped) for
// the person and feedback, when set, for the next prompt.
func (m *Manager) toNeeds(tx *store.Tx, cur loop.Loop, reason loop.NeedsReason, detail, feedback string, now time.Time) error {
	detail = strings.TrimSpace(detail)
	if len(detail) > maxNeedsDetail {
		detail = strings.ToValidUTF8(detail[:maxNeedsDetail], "") + "\n[… cut]"
	}
	first, _, _ := strings.Cut(detail, "\n")
	msg := fmt.Sprintf("needs you (%s): %s; act with: loopr answer %s \"…\"", reason, clipLine(first, 200), cur.ID)
	m.log.Warn("loop needs a person", "loop", cur.ID, "reason", reason)
	return control.Move(tx, cur, loop.NeedsHuman, now, msg, func(n *loop.Loop) {
		n.Needs = &loop.Needs{Reason: reason, Detail: detail, Since: now}
		n.Reason = "needs you (" + string(reason) + "): " + clipLine(first, 200)
		n.Answer = ""
		if feedback != "" {
			n.Feedback = feedback
		}
	})
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Normalizing a failure for its fingerprint: what changes between two runs
// of the same failure (times, durations, counts, hashes, temporary paths,
// the iteration number, and the session, message and request ids agents'
// structured output is full of) is replaced by a placeholder.
var (
	fpUUID = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	fpID   = regexp.MustCompile(`\b[A-Za-z0-9_]{12,}\b`) // kept unless it mixes letters and digits (msg_01Xy…, req_…)
	fpPath = regexp.MustCompile(`(?:[A-Za-z]:)?(?:[\w.~-]*/)+[\w.-]*`)
	fpHex  = regexp.MustCompile(`\b(?:0x)?[0-9a-fA-F]{7,}\b`)
	fpNum  = regexp.MustCompile(`\d+(?:[.:]\d+)*`)
	fpWS   = regexp.MustCompile(`[ \t]+`)
)

// Fingerprint identifies a failure up to what varies between runs of the
// same failure: the failing command (reason) and its output (feedback)
// with paths, hashes, numbers and times normalized. Two iterations with
// the same fingerprint failed the same way.
func Fingerprint(reason, feedback string) string {
	s := reason + "\n" + feedback
	s = fpUUID.ReplaceAllString(s, "<uuid>")
	s = fpID.ReplaceAllStringFunc(s, func(w string) string {
		if strings.ContainsAny(w, "0123456789") && strings.ContainsFunc(w, unicode.IsLetter) {
			return "<id>"
		}
		return w
	})
	s = fpPath.ReplaceAllString(s, "<path>")
	s = fpHex.ReplaceAllString(s, "<hex>")
	s = fpNum.ReplaceAllString(s, "<n>")
	s = fpWS.ReplaceAllString(s, " ")
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
