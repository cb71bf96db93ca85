package loop

// Session is the agent CLI session of a loop's latest agent run: what a
// later run resumes (agent.resume) and what `loopr attach` opens. It is
// set when the run's CLI reports its session id (or, for claude, when
// loopr picks it up front), and Ended says how that run ended.
type Session struct {
	ID        string `json:"id"`
	Profile   string `json:"profile"`   // the agent profile it ran on
	Workdir   string `json:"workdir"`   // the directory it ran in
	Iteration int    `json:"iteration"` // the iteration it ran in
	// Ended is how the run ended: "" while it runs (a daemon that
	// crashed left it so), or one of the SessionEnded values.
	Ended string `json:"ended,omitzero"`
}

// How a session's run ended (Session.Ended).
const (
	SessionInterrupted = "interrupted"  // the daemon stopped, a stall kill, a transient error, the timeout
	SessionRateLimited = "rate_limited" // the provider refused; the loop waited
	SessionAsked       = "asked"        // the agent asked a question (loopr answer)
	SessionFailed      = "failed"       // the iteration failed (validation, exit status)
	SessionPassed      = "passed"       // nothing to resume
)

// MaxSessionID bounds a session id read from an agent's output.
const MaxSessionID = 256
