package store

import (
	"encoding/binary"
	"fmt"

	"github.com/loopr-dev/loopr/loop"
)

// The extension block of a record tagged 0x02: the fields added after the
// binary layout of schema 2, read with the head (the scheduler's index
// needs the agent profile, usage and budget).
//
//	ext:  uvarint length of what follows, then fields, each a tag byte
//	      and its value:
//	  1 agent           string
//	  2 usage           varint input, output, cache_read, cache_creation; float cost_usd, agent_seconds
//	  3 budget          float usd; varint tokens
//	  4 needs           string reason, string detail, time since
//	  5 answer          string
//	  6 rate_limit_streak  varint
//	  7 transient_retries  varint
//	  8 stalls          varint
//	  9 failure         string fingerprint, varint repeats
//	 10 branch          string
//	 11 base            string branch, string commit
//	 12 depends_on      uvarint count, then each id a string
//	 13 subtree_done_at time
//	 14 commit          string
//	 15 evidence        uvarint count, then each: string command, varint
//	                    exit_code, varint duration_ms, string commit, string where
//	 16 review          (no value: the tag is the flag)
//	 17 comments        uvarint length of what follows, then uvarint count,
//	                    then each: varint seq, string path, varint line,
//	                    string text, string on, string commit, string
//	                    context, time at, varint answered_by, string outcome
//	                    (skipped when only the head is read)
//	 18 landed          string into, string commit, string mode, string from, time at
//	                    (16 and 17 are the review fields of issue 22)
//
// Zero fields are not written; a record with none is tagged 0x01 and has
// no block. A tag this build does not know makes the record undecodable,
// never silently dropped.
const (
	extAgent = 1 + iota
	extUsage
	extBudget
	extNeeds
	extAnswer
	extRateLimitStreak
	extTransientRetries
	extStalls
	extFailure
	extBranch
	extBase
	extDependsOn
	extSubtreeDone
)

// Tags of the merge queue's fields (issue 21); 12 and 13 are the
// dependency fields'.
const (
	extCommit   = 14
	extEvidence = 15
)

// Tags of the review fields (issue 22).
const (
	extReview   = 16
	extComments = 17
)

// Tag of `loopr land`'s record on a plan (issue 22).
const extLanded = 18

// Tag of the agent session (issue 23).
const extSession = 19 // 18 is landed (issue 22)

// Tag of the agent's reported progress (issue 26, report_progress). 20 is
// left to best-of-N's Fanout (issue 25): a duplicate tag is a compile
// error in the decoder's switch.
const extProgress = 21

// hasExt reports whether l has any field of the extension block.
func hasExt(l *loop.Loop) bool {
	return l.Agent != "" || l.Usage != (loop.Usage{}) || l.Budget != (loop.Budget{}) ||
		l.Needs != nil || l.Answer != "" || l.RateLimitStreak != 0 || l.TransientRetries != 0 ||
		l.Stalls != 0 || l.FailureFingerprint != "" || l.FailureRepeats != 0 || l.Branch != "" || l.Base != (loop.Base{}) ||
		len(l.DependsOn) > 0 || !l.SubtreeDoneAt.IsZero() ||
		l.Commit != "" || len(l.Evidence) > 0 || l.Review || len(l.Comments) > 0 ||
		l.Landed != (loop.Landed{}) || l.Session != nil || l.Progress != nil
}

// ext appends the extension block of l.
func (w *recWriter) ext(l *loop.Loop) {
	f := recWriter{}
	tagStr := func(tag byte, s string) {
		if s != "" {
			f.b = append(f.b, tag)
			f.str(s)
		}
	}
	tagInt := func(tag byte, v int) {
		if v != 0 {
			f.b = append(f.b, tag)
			f.int(v)
		}
	}
	tagStr(extAgent, l.Agent)
	if u := l.Usage; u != (loop.Usage{}) {
		f.b = append(f.b, extUsage)
		f.int(int(u.InputTokens))
		f.int(int(u.OutputTokens))
		f.int(int(u.CacheReadTokens))
		f.int(int(u.CacheCreationTokens))
		f.float(u.CostUSD)
		f.float(u.AgentSeconds)
	}
	if b := l.Budget; b != (loop.Budget{}) {
		f.b = append(f.b, extBudget)
		f.float(b.USD)
		f.int(int(b.Tokens))
	}
	if n := l.Needs; n != nil {
		f.b = append(f.b, extNeeds)
		f.str(string(n.Reason))
		f.str(n.Detail)
		f.time(n.Since)
	}
	tagStr(extAnswer, l.Answer)
	tagInt(extRateLimitStreak, l.RateLimitStreak)
	tagInt(extTransientRetries, l.TransientRetries)
	tagInt(extStalls, l.Stalls)
	if l.FailureFingerprint != "" || l.FailureRepeats != 0 {
		f.b = append(f.b, extFailure)
		f.str(l.FailureFingerprint)
		f.int(l.FailureRepeats)
	}
	tagStr(extBranch, l.Branch)
	if b := l.Base; b != (loop.Base{}) {
		f.b = append(f.b, extBase)
		f.str(b.Branch)
		f.str(b.Commit)
	}
	if len(l.DependsOn) > 0 {
		f.b = append(f.b, extDependsOn)
		f.b = binary.AppendUvarint(f.b, uint64(len(l.DependsOn)))
		for _, id := range l.DependsOn {
			f.str(id)
		}
	}
	if !l.SubtreeDoneAt.IsZero() {
		f.b = append(f.b, extSubtreeDone)
		f.time(l.SubtreeDoneAt)
	}
	tagStr(extCommit, l.Commit)
	if len(l.Evidence) > 0 {
		f.b = append(f.b, extEvidence)
		f.b = binary.AppendUvarint(f.b, uint64(len(l.Evidence)))
		for _, e := range l.Evidence {
			f.str(e.Command)
			f.int(e.ExitCode)
			f.int(int(e.DurationMS))
			f.str(e.Commit)
			f.str(e.Where)
		}
	}
	if l.Review {
		f.b = append(f.b, extReview)
	}
	if len(l.Comments) > 0 {
		f.b = append(f.b, extComments)
		f.comments(l.Comments)
	}
	if ld := l.Landed; ld != (loop.Landed{}) {
		f.b = append(f.b, extLanded)
		f.str(ld.Into)
		f.str(ld.Commit)
		f.str(ld.Mode)
		f.str(ld.From)
		f.time(ld.At)
	}
	if s := l.Session; s != nil {
		f.b = append(f.b, extSession)
		f.str(s.ID)
		f.str(s.Profile)
		f.str(s.Workdir)
		f.int(s.Iteration)
		f.str(s.Ended)
	}
	if p := l.Progress; p != nil {
		f.b = append(f.b, extProgress)
		f.str(p.Text)
		f.int(p.Percent)
		f.time(p.At)
	}
	w.b = binary.AppendUvarint(w.b, uint64(len(f.b)))
	w.b = append(w.b, f.b...)
}

// comments appends a comments field's value: its length, then the count
// and each comment, so a head-only read skips it whole.
func (w *recWriter) comments(cs []loop.Comment) {
	v := recWriter{}
	v.b = binary.AppendUvarint(v.b, uint64(len(cs)))
	for _, c := range cs {
		v.int(c.Seq)
		v.str(c.Path)
		v.int(c.Line)
		v.str(c.Text)
		v.str(c.On)
		v.str(c.Commit)
		v.str(c.Context)
		v.time(c.At)
		v.int(c.AnsweredBy)
		v.str(c.Outcome)
	}
	w.str(string(v.b))
}

// ext decodes an extension block into l.
func (r *recReader) ext(l *loop.Loop) {
	block := r.raw()
	if r.err != nil {
		return
	}
	f := recReader{b: block}
	for len(f.b) > 0 && f.err == nil {
		switch tag := f.byte(); tag {
		case extAgent:
			l.Agent = f.str()
		case extUsage:
			l.Usage = loop.Usage{
				InputTokens: int64(f.int()), OutputTokens: int64(f.int()),
				CacheReadTokens: int64(f.int()), CacheCreationTokens: int64(f.int()),
			}
			l.Usage.CostUSD = f.float()
			l.Usage.AgentSeconds = f.float()
		case extBudget:
			l.Budget.USD = f.float()
			l.Budget.Tokens = int64(f.int())
		case extNeeds:
			n := &loop.Needs{Reason: loop.NeedsReason(f.str()), Detail: f.str()}
			n.Since = f.time()
			l.Needs = n
		case extAnswer:
			l.Answer = f.str()
		case extRateLimitStreak:
			l.RateLimitStreak = f.int()
		case extTransientRetries:
			l.TransientRetries = f.int()
		case extStalls:
			l.Stalls = f.int()
		case extFailure:
			l.FailureFingerprint = f.str()
			l.FailureRepeats = f.int()
		case extBranch:
			l.Branch = f.str()
		case extBase:
			l.Base.Branch = f.str()
			l.Base.Commit = f.str()
		case extDependsOn:
			n := f.uvarint()
			if n > uint64(len(f.b)) { // each id takes at least a byte
				f.fail()
				break
			}
			l.DependsOn = make([]loop.ID, n)
			for i := range l.DependsOn {
				l.DependsOn[i] = f.str()
			}
		case extSubtreeDone:
			l.SubtreeDoneAt = f.time()
		case extCommit:
			l.Commit = f.str()
		case extEvidence:
			l.Evidence = f.evidence()
		case extReview:
			l.Review = true
		case extComments:
			block := f.raw()
			if !r.headOnly && f.err == nil {
				l.Comments = comments(block, &f)
			}
		case extLanded:
			l.Landed = loop.Landed{Into: f.str(), Commit: f.str(), Mode: f.str(), From: f.str()}
			l.Landed.At = f.time()
		case extSession:
			s := &loop.Session{ID: f.str(), Profile: f.str(), Workdir: f.str()}
			s.Iteration, s.Ended = f.int(), f.str()
			l.Session = s
		case extProgress:
			p := &loop.Progress{Text: f.str(), Percent: f.int()}
			p.At = f.time()
			l.Progress = p
		default:
			f.err = fmt.Errorf("unknown extension field %d (written by a newer loopr?)", tag)
		}
	}
	if f.err != nil && r.err == nil {
		r.err = f.err
	}
}

// comments decodes a comments field's value; an error is set on into.
func comments(block []byte, into *recReader) []loop.Comment {
	r := recReader{b: block}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > uint64(len(r.b)) || n > loop.MaxComments) {
		r.err = fmt.Errorf("comments: %d in %d bytes", n, len(r.b))
	}
	var out []loop.Comment
	for i := uint64(0); r.err == nil && i < n; i++ {
		c := loop.Comment{Seq: r.int(), Path: r.str(), Line: r.int(), Text: r.str(), On: r.str(), Commit: r.str(), Context: r.str()}
		c.At = r.time()
		c.AnsweredBy, c.Outcome = r.int(), r.str()
		out = append(out, c)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("comments: %d bytes after the last", len(r.b))
	}
	if r.err != nil {
		into.err = r.err
		return nil
	}
	return out
}

// evidence reads the entries of an evidence field; a count the block
// cannot hold is an error, never a huge allocation.
func (r *recReader) evidence() []loop.Evidence {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n == 0 || n > uint64(len(r.b)) || n > loop.MaxEvidence {
		r.err = fmt.Errorf("evidence: %d entries in %d bytes", n, len(r.b))
		return nil
	}
	out := make([]loop.Evidence, 0, n)
	for range n {
		e := loop.Evidence{Command: r.str(), ExitCode: r.int()}
		e.DurationMS = int64(r.int())
		e.Commit, e.Where = r.str(), r.str()
		if r.err != nil {
			return nil
		}
		out = append(out, e)
	}
	return out
}
