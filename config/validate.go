package config

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loopr-dev/loopr/fanout"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
)

// Error is a problem with a configuration. It names the file (its base name),
// the line (0 when unknown, as for configurations built in code) and the
// dotted key (empty for problems with the document as a whole).
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

// Error formats e as one line: "loopr.yml:12: concurrency.max_loops: must be > 0".
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return strings.ReplaceAll(b.String(), "\n", `\n`)
}

func baseName(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}

// joinKey appends name to a dotted key, quoting names that would make the key
// ambiguous or span lines.
func joinKey(parent, name string) string {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) {
		name = strconv.Quote(name)
	}
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// maxValue bounds every integer setting, so that seconds convert to a
// time.Duration and scores add up without overflow.
const maxValue = 1_000_000_000

// Validate checks every setting's range and the relations between settings,
// and returns the first problem as an *Error (Line 0). Settings are checked
// in a fixed order — the order of loopr.yml, loops by built-in type, user
// types by name — so the same configuration always gives the same error.
func (c *Config) Validate() error { return c.validate(nil) }

// validate is Validate with the key lines of a parsed file.
func (c *Config) validate(pos map[string]int) error {
	return c.check(&checker{file: baseName(c.File), pos: pos})
}

// check runs every check of Validate with v.
func (c *Config) check(v *checker) error {
	v.positive("scheduler.poll_interval_secs", c.Scheduler.PollIntervalSecs)
	p := c.Scheduler.Priority
	v.nonNegative("scheduler.priority.plan", p.Plan)
	v.nonNegative("scheduler.priority.spec", p.Spec)
	v.nonNegative("scheduler.priority.phase", p.Phase)
	v.nonNegative("scheduler.priority.ralph", p.Ralph)
	v.nonNegative("scheduler.priority.age_boost_per_minute", p.AgeBoostPerMinute)
	v.nonNegative("scheduler.priority.age_boost_max", p.AgeBoostMax)
	v.nonNegative("scheduler.priority.depth_boost_per_level", p.DepthBoostPerLevel)
	v.nonNegative("scheduler.priority.retry_penalty_per_iteration", p.RetryPenaltyPerIteration)
	v.nonNegative("scheduler.priority.retry_penalty_max", p.RetryPenaltyMax)
	v.nonNegative("scheduler.priority.tree_boost_max", p.TreeBoostMax)
	v.nonNegative("scheduler.priority.tree_age_boost_per_minute", p.TreeAgeBoostPerMinute)
	v.nonNegative("scheduler.priority.tree_age_boost_max", p.TreeAgeBoostMax)
	if p.TreeBoostMax > 0 && (p.TreeAgeBoostMax < p.TreeBoostMax || p.TreeAgeBoostPerMinute <= 0) {
		// Without it a large tree could wait forever behind a stream of
		// small ones: its age must be able to outweigh any tree boost.
		v.fail("scheduler.priority.tree_age_boost_max",
			"must be >= tree_boost_max (%d), with tree_age_boost_per_minute > 0, so that an old tree's age outweighs a newer tree's boost (or set tree_boost_max: 0)", p.TreeBoostMax)
	}
	f := c.Scheduler.Fairness
	if a := f.Alpha; math.IsNaN(a) || a <= 0 || a > 1 {
		v.fail("scheduler.fairness.alpha", "must be > 0 and <= 1")
	}
	v.nonNegative("scheduler.fairness.idle_ttl_secs", f.IdleTTLSecs)

	cc := c.Concurrency
	v.positive("concurrency.max_loops", cc.MaxLoops)
	v.positive("concurrency.max_api_calls", cc.MaxAPICalls)
	v.nonNegative("concurrency.per_type.plan", cc.PerType.Plan)
	v.nonNegative("concurrency.per_type.spec", cc.PerType.Spec)
	v.nonNegative("concurrency.per_type.phase", cc.PerType.Phase)
	v.nonNegative("concurrency.per_type.ralph", cc.PerType.Ralph)

	v.nonNegative("admission.max_pending", c.Admission.MaxPending)
	for _, owner := range slices.Sorted(maps.Keys(c.Quotas)) {
		key := joinKey("quotas", owner)
		if strings.TrimSpace(owner) == "" {
			v.fail(key, "owner name must not be empty")
		}
		q := c.Quotas[owner]
		v.nonNegative(key+".max_running", q.MaxRunning)
		v.nonNegative(key+".max_pending", q.MaxPending)
	}

	rl := c.RateLimit
	v.positive("rate_limit.initial_backoff_secs", rl.InitialBackoffSecs)
	v.nonNegative("rate_limit.max_backoff_secs", rl.MaxBackoffSecs)
	v.atLeast("rate_limit.max_backoff_secs", rl.MaxBackoffSecs, "rate_limit.initial_backoff_secs", rl.InitialBackoffSecs)
	v.nonNegative("rate_limit.recovery_period_secs", rl.RecoveryPeriodSecs)
	v.positive("rate_limit.max_concurrent_api_calls", rl.MaxConcurrentAPICalls)

	r := c.Retry
	v.nonNegative("retry.backoff_base_secs", r.BackoffBaseSecs)
	switch f := r.BackoffFactor; {
	case math.IsNaN(f) || math.IsInf(f, 0):
		v.fail("retry.backoff_factor", "must be a finite number")
	case f < 1:
		v.fail("retry.backoff_factor", "must be >= 1")
	case f > 1000:
		v.fail("retry.backoff_factor", "must be <= 1000")
	}
	v.nonNegative("retry.backoff_max_secs", r.BackoffMaxSecs)
	v.atLeast("retry.backoff_max_secs", r.BackoffMaxSecs, "retry.backoff_base_secs", r.BackoffBaseSecs)
	v.nonNegative("retry.no_progress_limit", r.NoProgressLimit)

	v.nonNegative("retry.transient_max", r.TransientMax)
	v.positive("rate_limit.max_consecutive", rl.MaxConsecutive)
	v.nonNegative("rate_limit.notify_after_secs", rl.NotifyAfterSecs)

	v.agent("agent", c.Agent)
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		key := joinKey("agents", name)
		switch {
		case name == DefaultProfile:
			v.fail(key, "%q names the agent: section; give this profile another name", name)
		case !loop.ValidTypeName(name):
			v.fail(key, "invalid profile name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter")
		}
		v.agent(key, c.Agents[name])
	}
	v.fallbacks(c)
	v.budget("budget", c.Budget)

	for _, t := range loop.BuiltinTypes {
		v.loop("loops."+t, c.Loops[t])
		v.profileRef(c, "loops."+t+".agent", c.Loops[t].Agent)
	}
	for _, t := range slices.Sorted(maps.Keys(c.Loops)) {
		if !builtin(t) {
			v.fail(joinKey("loops", t), "not a built-in type (plan, spec, phase, ralph); user types go under types")
		}
	}

	if q := c.Storage.DiskQuotaMinGB; math.IsNaN(q) || math.IsInf(q, 0) {
		v.fail("storage.disk_quota_min_gb", "must be a finite number")
	} else if q < 0 {
		v.fail("storage.disk_quota_min_gb", "must be >= 0")
	}

	v.store(c.Store)
	v.worker(c.Worker, c.Git)
	switch c.Merge.Refresh {
	case RefreshMerge, RefreshRebase, RefreshOff:
	default:
		v.fail("merge.refresh", "unknown value %q (want merge, rebase or off)", c.Merge.Refresh)
	}
	v.merge(c.Merge)
	v.nonNegative("retention.days", c.Retention.Days)
	v.api(c.API)
	for i, w := range c.Webhooks {
		v.webhook(fmt.Sprintf("webhooks[%d]", i), w)
	}
	if len(c.Notify.Command) > 0 {
		v.argv("notify.command", c.Notify.Command)
	}
	v.hooks("hooks", c.Hooks)
	v.copies(c.Worktree.Copy)

	for _, t := range slices.Sorted(maps.Keys(c.UserTypes)) {
		key := joinKey("types", t)
		switch {
		case builtin(t):
			v.fail(key, "%s is a built-in type: set it with scheduler.priority.%[1]s, concurrency.per_type.%[1]s and loops.%[1]s", t)
		case !loop.ValidTypeName(t):
			v.fail(key, "invalid type name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter")
		}
		u := c.UserTypes[t]
		v.nonNegative(key+".base", u.Base)
		v.nonNegative(key+".max_running", u.MaxRunning)
		v.loop(key, u.loopSettings())
		v.profileRef(c, key+".agent", u.Agent)
	}
	if v.err != nil {
		return v.err
	}
	return nil
}

// checker keeps the first failed check.
type checker struct {
	file   string
	pos    map[string]int // line of each key present in the file; nil for code
	err    *Error
	prefix string // prepended to keys in errors (Overlay)
}

func (v *checker) fail(key, format string, args ...any) {
	if v.err == nil {
		v.err = &Error{File: v.file, Line: v.line(key), Key: prefixKey(v.prefix, key), Msg: fmt.Sprintf(format, args...)}
	}
}

// line returns the line of key, or of its nearest ancestor in the file.
func (v *checker) line(key string) int {
	for key != "" {
		if l, ok := v.pos[key]; ok {
			return l
		}
		key = key[:max(strings.LastIndexAny(key, ".["), 0)]
	}
	return 0
}

func (v *checker) set(key string) bool {
	_, ok := v.pos[key]
	return ok
}

func (v *checker) positive(key string, n int) {
	if n <= 0 {
		v.fail(key, "must be > 0")
	}
	v.bounded(key, n)
}

func (v *checker) nonNegative(key string, n int) {
	if n < 0 {
		v.fail(key, "must be >= 0")
	}
	v.bounded(key, n)
}

func (v *checker) bounded(key string, n int) {
	if n > maxValue {
		v.fail(key, "must be <= %d", maxValue)
	}
}

// atLeast checks n (at key) >= m (at minKey). When the file set only minKey,
// the error names minKey: that is the line the user wrote.
func (v *checker) atLeast(key string, n int, minKey string, m int) {
	if n >= m {
		return
	}
	if v.set(minKey) && !v.set(key) {
		v.fail(minKey, "must be <= %s (%d)", key, n)
		return
	}
	v.fail(key, "must be >= %s (%d)", minKey, m)
}

// argv checks a command line: the program must be named.
func (v *checker) argv(key string, argv []string) {
	if len(argv) > 0 && strings.TrimSpace(argv[0]) == "" {
		v.fail(key+"[0]", "must not be empty")
	}
}

func (v *checker) loop(key string, s LoopSettings) {
	v.positive(key+".max_iterations", s.MaxIterations)
	for i, cmd := range s.Validate {
		if strings.TrimSpace(cmd) == "" {
			v.fail(fmt.Sprintf("%s.validate[%d]", key, i), "must not be empty")
		}
	}
	switch s.ValidateIn {
	case "", ValidateInWorktree, ValidateInClean:
	default:
		v.fail(key+".validate_in", "unknown value %q (want worktree or clean)", s.ValidateIn)
	}
	v.nonNegative(key+".timeout_secs", s.TimeoutSecs)
	v.fanout(key, s)
	v.budget(key+".budget", s.Budget)
	v.nonNegative(key+".tier", s.Tier)
	if g := s.ConflictGroup; g != "" && !validGroup(g) {
		v.fail(key+".conflict_group", "invalid group name %q: use up to 64 letters, digits, '-', '_' and '.'", g)
	}
	v.nonNegative(key+".default_cost", s.DefaultCost)
	if c := s.Children; c != "" && c != Parallel && c != Sequential {
		v.fail(key+".children", "%q: must be %s or %s", c, Parallel, Sequential)
	}
	v.hooks(key+".hooks", s.Hooks)
}

// validGroup reports whether g can name a conflict group.
func validGroup(g string) bool {
	return len(g) <= 64 && strings.IndexFunc(g, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
}

// webhook checks one receiver: an absolute http or https URL with a host
// and, if it names one, a port from 1 to 65535 (nothing else: no file:, no
// unix sockets), and known event names.
func (v *checker) webhook(key string, w Webhook) {
	u, err := url.Parse(w.URL)
	switch {
	case strings.TrimSpace(w.URL) == "":
		v.fail(key+".url", "must not be empty")
	case err != nil:
		v.fail(key+".url", "must be a URL: %s", strings.TrimPrefix(err.Error(), "parse "))
	case u.Scheme != "http" && u.Scheme != "https":
		v.fail(key+".url", "must be an http:// or https:// URL, got scheme %q", u.Scheme)
	case u.Hostname() == "":
		v.fail(key+".url", "must name a host")
	case badPort(u) != "":
		v.fail(key+".url", "%s", badPort(u))
	}
	if len(w.Events) == 0 {
		v.fail(key+".events", "must list at least one event (%s)", strings.Join(WebhookEvents, ", "))
	}
	seen := map[string]bool{}
	for i, e := range w.Events {
		ek := fmt.Sprintf("%s.events[%d]", key, i)
		switch {
		case !slices.Contains(WebhookEvents, e):
			v.fail(ek, "unknown event %q (known: %s)", e, strings.Join(WebhookEvents, ", "))
		case seen[e]:
			v.fail(ek, "duplicate event %q", e)
		}
		seen[e] = true
	}
}

// agent checks one agent profile (agent:, or an entry of agents:).
func (v *checker) agent(key string, a Agent) {
	if _, ok := preset.Get(a.Preset); !ok {
		v.fail(key+".preset", "unknown preset %q (known: %s)", a.Preset, strings.Join(preset.Names, ", "))
	}
	if len(a.Argv()) == 0 {
		v.fail(key+".command", "must not be empty with preset %s (it has no command of its own)", a.Preset)
	}
	v.argv(key+".command", a.Command)
	v.positive(key+".timeout_secs", a.TimeoutSecs)
	v.nonNegative(key+".stall_timeout_secs", a.StallTimeoutSecs)
	v.nonNegative(key+".retry_timeout_secs", a.RetryTimeoutSecs)
	if code := a.RateLimitExitCode; code < 1 || code > 255 {
		v.fail(key+".rate_limit_exit_code", "must be between 1 and 255")
	}
	if a.RateLimitPattern == "" {
		v.fail(key+".rate_limit_pattern", `must not be empty (to turn the check off, use a pattern that never matches: '[^\s\S]')`)
	}
	if re, err := a.RateLimitRegexp(); err != nil {
		v.fail(key+".rate_limit_pattern", "must be a valid Go regexp: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	} else if re != nil && re.MatchString("") {
		v.fail(key+".rate_limit_pattern", "matches empty output, so every run would count as rate limited")
	}
	v.resume(key, a)
	v.security(key, a)
}

// resume checks a profile's session keys: agent.resume, and the command
// preset's resume_args and session_pattern, which go together.
func (v *checker) resume(key string, a Agent) {
	if a.Resume != "" && !slices.Contains(ResumeModes, a.Resume) {
		v.fail(key+".resume", "must be one of %s, not %q", strings.Join(ResumeModes, ", "), a.Resume)
	}
	re, err := a.SessionRegexp()
	switch {
	case err != nil:
		v.fail(key+".session_pattern", "must be a valid Go regexp: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	case re != nil && re.NumSubexp() < 1:
		v.fail(key+".session_pattern", "must have a group, (...), around the session id")
	case re != nil && len(a.ResumeArgs) == 0:
		v.fail(key+".resume_args", `must be set with session_pattern, e.g. ["--resume", "{session}"]`)
	case len(a.ResumeArgs) > 0 && re == nil:
		v.fail(key+".session_pattern", "must be set with resume_args: a Go regexp whose first group is the session id in the agent's output")
	case len(a.ResumeArgs) > 0 && !slices.ContainsFunc(a.ResumeArgs, func(s string) bool { return strings.Contains(s, "{session}") }):
		v.fail(key+".resume_args", "must contain {session}, where the session id goes")
	}
	if (re != nil || len(a.ResumeArgs) > 0) && a.Preset != preset.Command {
		v.fail(key+".resume_args", "only the command preset takes resume_args and session_pattern (preset %s resumes its own way)", a.Preset)
	}
}

// profileRef checks that name ("" = the default) names an agent profile.
func (v *checker) profileRef(c *Config, key, name string) {
	if name == "" {
		return
	}
	if _, ok := c.Profile(name); !ok {
		v.fail(key, "unknown agent profile %q (known: %s)", name, strings.Join(c.Profiles(), ", "))
	}
}

// fallbacks checks every profile's fallback list: known names, no
// duplicates, no profile falling back to itself, directly or through others.
func (v *checker) fallbacks(c *Config) {
	for _, name := range c.Profiles() {
		a, _ := c.Profile(name)
		key := "agent"
		if name != DefaultProfile {
			key = joinKey("agents", name)
		}
		seen := map[string]bool{}
		for i, f := range a.Fallback {
			fk := fmt.Sprintf("%s.fallback[%d]", key, i)
			v.profileRef(c, fk, f)
			if seen[f] {
				v.fail(fk, "duplicate profile %q", f)
			}
			seen[f] = true
		}
		if cycle := fallbackCycle(c, name); cycle != nil {
			v.fail(key+".fallback", "fallback cycle: %s", strings.Join(cycle, " → "))
		}
	}
}

// fallbackCycle returns a path of fallbacks from start back to start, or nil.
func fallbackCycle(c *Config, start string) []string {
	var path []string
	onPath := map[string]bool{}
	done := map[string]bool{}
	var walk func(n string) []string
	walk = func(n string) []string {
		if n == "" {
			n = DefaultProfile
		}
		if onPath[n] {
			if n == start {
				return append(slices.Clone(path), n)
			}
			return nil
		}
		if done[n] {
			return nil
		}
		a, ok := c.Profile(n)
		if !ok {
			return nil
		}
		onPath[n] = true
		path = append(path, n)
		for _, f := range a.Fallback {
			if cyc := walk(f); cyc != nil {
				return cyc
			}
		}
		path = path[:len(path)-1]
		onPath[n] = false
		done[n] = true
		return nil
	}
	return walk(start)
}

// budget checks a budget: finite, non-negative amounts.
func (v *checker) budget(key string, b Budget) {
	if u := b.USD; math.IsNaN(u) || math.IsInf(u, 0) {
		v.fail(key+".usd", "must be a finite number")
	} else if u < 0 {
		v.fail(key+".usd", "must be >= 0 (0 = no budget)")
	}
	v.nonNegative(key+".tokens", b.Tokens)
}

// fanout checks the best-of-N keys of a type.
func (v *checker) fanout(key string, s LoopSettings) {
	_, spawns := loop.ChildType(strings.TrimPrefix(key, "loops."))
	switch {
	case s.Fanout < 0 || s.Fanout > fanout.MaxN:
		v.fail(key+".fanout", "%d: must be 0 to %d (0 or 1 = one loop, N = N candidates of which one merges)", s.Fanout, fanout.MaxN)
	case s.Fanout > 1 && spawns:
		v.fail(key+".fanout", "only tasks fan out (ralph and user types): a %s writes an artifact, not code to merge", strings.TrimPrefix(key, "loops."))
	}
	if s.FanoutPick != "" && !slices.Contains(fanout.Picks, s.FanoutPick) {
		v.fail(key+".fanout_pick", "unknown value %q (want %s)", s.FanoutPick, strings.Join(fanout.Picks, ", "))
	}
	if s.FanoutPick == fanout.PickJudge && len(s.FanoutJudge) == 0 {
		v.fail(key+".fanout_judge", "required with fanout_pick: judge: the command (argv) that reads the passing candidates' diffs and prints the winner")
	}
	for i, a := range s.FanoutJudge {
		if i == 0 && strings.TrimSpace(a) == "" {
			v.fail(key+".fanout_judge[0]", "must name a program")
		}
	}
}
