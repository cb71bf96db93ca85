// Package config loads loopr.yml: the defaults of SPEC §5, the file laid over
// them, and the per-type views the scheduler and the runner read.
//
// Decoding is strict. The file is parsed into a YAML node tree and walked
// against the Go structs, so that every problem — a syntax error, an unknown
// or duplicate key, a value of the wrong type, a value out of range — comes
// back as one *Error that names the file, the line and the dotted key:
//
//	loopr.yml:12: concurrency.max_loops: must be > 0
//
// Only the first problem is reported: the CLI prints one line and exits 2.
// Decoding problems come in document order, then range checks in the fixed
// order of Validate, so the same file always gives the same error.
//
// Zero values in the per-type settings mean "inherit": an empty agent is
// the profile `agent:` (named DefaultProfile), timeout_secs 0 uses the
// profile's timeout_secs, an empty prompt uses the workspace's
// .loopr/prompts/<type>.md or the built-in template. Loop resolves them.
//
// Agent profiles: `agent:` and each entry of `agents:` have the same keys;
// an entry starts from DefaultAgent (not from `agent:`). A profile's preset
// supplies its argv unless command is set, its extra environment and the
// parser of its output. Fallback names are checked (known, no duplicate, no
// cycle, directly or through other profiles). loops.<type>.agent names a
// profile; the argv list it once held is refused with a message saying so.
//
// Choices where SPEC §5 is silent:
//   - An empty file, or an empty section (`scheduler:` with nothing under
//     it), keeps the defaults; an empty scalar (`max_loops:`) is an error.
//   - Integers must be YAML integers ("5" in quotes is a string); booleans
//     are true/false only (YAML 1.1's yes/no are rejected); string settings
//     take any scalar, so `validate: [make, 2]` means what it says.
//   - Anchors and aliases work; merge keys (<<) and multiple documents do not.
//   - A user type starts from DefaultTypeSettings (base 50, 10 iterations).
//     `types:` cannot name a built-in type, and `loops:` names only built-in
//     types.
//   - Every integer is at most 1,000,000,000, so seconds convert to a
//     time.Duration without overflow. Caps of 0 (per_type, max_running) mean
//     "no per-type cap"; global caps must be > 0.
//   - agent.rate_limit_pattern may not match empty output (it would mark
//     every run rate limited); '[^\s\S]' matches nothing and turns it off.
//   - Errors name the file by its base name, as loopr.yml appears in messages.
//   - `webhooks:` is a list of mappings, each decoded like a section, so
//     errors name the entry (webhooks[1].url); only http and https URLs and
//     the names in WebhookEvents are accepted. Diff lists what a hot reload
//     changes, by the same dotted keys.
package config

import (
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// Config is loopr's configuration: the defaults with loopr.yml laid over them.
// The yaml tags are the file's key names; yaml.Marshal of a valid Config is a
// valid loopr.yml.
type Config struct {
	Scheduler   Scheduler        `yaml:"scheduler"`
	Concurrency Concurrency      `yaml:"concurrency"`
	Admission   Admission        `yaml:"admission"`
	Quotas      map[string]Quota `yaml:"quotas,omitempty"` // limits by owner (a loop's owner)
	RateLimit   RateLimit        `yaml:"rate_limit"`
	Retry       Retry            `yaml:"retry"`
	Agent       Agent            `yaml:"agent"`
	// Agents names more agent profiles, with the keys of `agent:`; the
	// profile `agent:` itself is named DefaultProfile.
	Agents    map[string]Agent        `yaml:"agents,omitempty"`
	Budget    Budget                  `yaml:"budget"` // default budget of a plan tree (its root loop)
	Loops     map[string]LoopSettings `yaml:"loops"`  // keyed by built-in type
	Git       Git                     `yaml:"git"`
	Merge     Merge                   `yaml:"merge"`
	Storage   Storage                 `yaml:"storage"`
	Store     Store                   `yaml:"store"`
	Worker    Worker                  `yaml:"worker"`
	Retention Retention               `yaml:"retention"`
	API       API                     `yaml:"api"`
	// Webhooks lists the receivers of loop events (the daemon POSTs them).
	Webhooks []Webhook `yaml:"webhooks"`
	// Notify runs a command of the user's when a loop needs a person, is
	// parked (failed), or a plan's whole tree is done.
	Notify Notify `yaml:"notify"`
	// Hooks are shell commands run at points of a loop's life (HookNames),
	// by name; loops.<type>.hooks replaces them for that type.
	Hooks map[string]Hook `yaml:"hooks,omitempty"`
	// Worktree is the `worktree:` section: what every new worktree gets.
	Worktree Worktree `yaml:"worktree"`
	// UserTypes is the file's `types:` section: extra loop types by name.
	// (Not named Types: that is the method listing every type.)
	UserTypes map[string]TypeSettings `yaml:"types,omitempty"`
	// File is the path the configuration came from, "" for defaults.
	File string `yaml:"-"`
}

// Scheduler is the `scheduler:` section.
type Scheduler struct {
	PollIntervalSecs int      `yaml:"poll_interval_secs"`
	Priority         Priority `yaml:"priority"`
	Fairness         Fairness `yaml:"fairness"`
}

// Fairness is `scheduler.fairness:`: fair queuing between fairness keys
// (seed 002). A loop's key is its fairness_key, else its root plan's id.
// Within a tier, the key that has used the least goes first.
type Fairness struct {
	Enabled bool `yaml:"enabled"`
	// Alpha smooths the learned cost of a (type, key): each observed wall
	// time w moves it to alpha*w + (1-alpha)*cost. 0 < alpha <= 1.
	Alpha float64 `yaml:"alpha"`
	// IdleTTLSecs forgets a key this long after it was last charged or
	// observed; it comes back at the lowest accumulated cost. 0 = never.
	IdleTTLSecs int `yaml:"idle_ttl_secs"`
}

// IdleTTL returns IdleTTLSecs as a duration.
func (f Fairness) IdleTTL() time.Duration { return time.Duration(f.IdleTTLSecs) * time.Second }

// Admission is the `admission:` section: limits checked when a loop is
// submitted (loopr add, loopr plan, the API), not when it starts.
type Admission struct {
	// MaxPending refuses a new loop while this many loops wait (pending or
	// paused); 0 = unlimited. Children spawned from an artifact are not refused.
	MaxPending int `yaml:"max_pending"`
}

// Quota is one entry of `quotas:`: the limits of one owner.
type Quota struct {
	MaxRunning int `yaml:"max_running"` // loops of the owner running at once (reason quota); 0 = unlimited
	MaxPending int `yaml:"max_pending"` // a new loop is refused while the owner has this many waiting; 0 = unlimited
}

// Priority holds the weights of the priority score (SPEC §4):
//
//	base(type) + min(age_minutes*AgeBoostPerMinute, AgeBoostMax)
//	+ depth*DepthBoostPerLevel
//	- min(max(iteration-1, 0)*RetryPenaltyPerIteration, RetryPenaltyMax)
//	+ round(TreeBoostMax * least tree left / this tree left)
//	+ min(tree_age_minutes*TreeAgeBoostPerMinute, TreeAgeBoostMax)
type Priority struct {
	Plan                     int `yaml:"plan"`
	Spec                     int `yaml:"spec"`
	Phase                    int `yaml:"phase"`
	Ralph                    int `yaml:"ralph"`
	AgeBoostPerMinute        int `yaml:"age_boost_per_minute"`
	AgeBoostMax              int `yaml:"age_boost_max"`
	DepthBoostPerLevel       int `yaml:"depth_boost_per_level"`
	RetryPenaltyPerIteration int `yaml:"retry_penalty_per_iteration"`
	RetryPenaltyMax          int `yaml:"retry_penalty_max"`
	// The tree term (issue 25; scheduler/tree.go): shortest remaining tree
	// first, TreeBoostMax × the least work left in a tree ÷ this tree's,
	// bounded by a saturating tree age, min(tree age minutes ×
	// TreeAgeBoostPerMinute, TreeAgeBoostMax). 0 turns each part off.
	TreeBoostMax          int `yaml:"tree_boost_max"`
	TreeAgeBoostPerMinute int `yaml:"tree_age_boost_per_minute"`
	TreeAgeBoostMax       int `yaml:"tree_age_boost_max"`
}

// Concurrency is the `concurrency:` section. Caps count running loops.
type Concurrency struct {
	MaxLoops    int     `yaml:"max_loops"`
	MaxAPICalls int     `yaml:"max_api_calls"`
	PerType     PerType `yaml:"per_type"`
}

// PerType caps the running loops of each built-in type; 0 means no per-type cap.
type PerType struct {
	Plan  int `yaml:"plan"`
	Spec  int `yaml:"spec"`
	Phase int `yaml:"phase"`
	Ralph int `yaml:"ralph"`
}

// RateLimit is the `rate_limit:` section: the backoff of an agent profile
// the provider limits (each profile has its own state).
type RateLimit struct {
	InitialBackoffSecs    int `yaml:"initial_backoff_secs"`
	MaxBackoffSecs        int `yaml:"max_backoff_secs"`
	RecoveryPeriodSecs    int `yaml:"recovery_period_secs"`
	MaxConcurrentAPICalls int `yaml:"max_concurrent_api_calls"`
	// MaxConsecutive parks a loop (failed) that was rate limited this many
	// times in a row without an iteration running to an outcome.
	MaxConsecutive int `yaml:"max_consecutive"`
	// NotifyAfterSecs: a profile limited for longer than this, with no
	// unlimited fallback, puts the loops waiting on it in needs_human
	// (reason limit) until the limit ends; 0 = never.
	NotifyAfterSecs int `yaml:"notify_after_secs"`
}

// NotifyAfter returns NotifyAfterSecs as a duration.
func (r RateLimit) NotifyAfter() time.Duration { return time.Duration(r.NotifyAfterSecs) * time.Second }

// Retry is the `retry:` section: the wait between failed iterations.
type Retry struct {
	BackoffBaseSecs int     `yaml:"backoff_base_secs"`
	BackoffFactor   float64 `yaml:"backoff_factor"`
	BackoffMaxSecs  int     `yaml:"backoff_max_secs"`
	// NoProgressLimit: that many consecutive iterations failing the same
	// way put the loop in needs_human (no_progress); 0 = off.
	NoProgressLimit int `yaml:"no_progress_limit"`
	// TransientMax is how many transient provider errors (5xx, overloaded,
	// connection reset) one iteration may meet and be retried without
	// being spent; one more fails the iteration.
	TransientMax int `yaml:"transient_max"`
}

// Delay returns how long a loop waits after its iteration-th iteration
// failed: backoff_base_secs * backoff_factor^(iteration-1), at most
// backoff_max_secs. There is no jitter, so the wait is reproducible.
func (r Retry) Delay(iteration int) time.Duration {
	if r.BackoffBaseSecs <= 0 {
		return 0
	}
	limit := time.Duration(r.BackoffMaxSecs) * time.Second
	d := float64(r.BackoffBaseSecs) * math.Pow(r.BackoffFactor, float64(max(iteration-1, 0)))
	if math.IsNaN(d) || d*float64(time.Second) >= float64(limit) {
		return limit
	}
	return time.Duration(d * float64(time.Second))
}

// Budget is a spending ceiling: `budget:` (a plan tree's) and
// loops.<type>.budget (each loop's own). 0 = no ceiling of that kind.
type Budget struct {
	USD    float64 `yaml:"usd"`
	Tokens int     `yaml:"tokens"`
}

// Loop returns b as a loop record's budget.
func (b Budget) Loop() loop.Budget { return loop.Budget{USD: b.USD, Tokens: int64(b.Tokens)} }

// DefaultRateLimitPattern matches the messages agent CLIs print when the
// provider limits them.
const DefaultRateLimitPattern = ratelimit.DefaultPattern

// RateLimitRegexp compiles RateLimitPattern. It returns nil, nil for an
// empty pattern (only possible in a configuration that fails Validate).
func (a Agent) RateLimitRegexp() (*regexp.Regexp, error) {
	if a.RateLimitPattern == "" {
		return nil, nil
	}
	return regexp.Compile(a.RateLimitPattern)
}

// LoopSettings is one entry of `loops:`, and what Loop returns with the
// inherited values filled in.
type LoopSettings struct {
	MaxIterations int `yaml:"max_iterations"`
	// RequireApproval makes a validated loop wait for `loopr approve`.
	// SPEC §3 defines it for plans; other types may ignore it.
	RequireApproval bool `yaml:"require_approval"`
	// Validate lists shell commands (sh -c, in the workdir) that must all
	// exit 0 for an iteration to pass.
	Validate []string `yaml:"validate"`
	// ValidateIn says where they run: ValidateInWorktree (the loop's
	// worktree as the agent left it), or ValidateInClean, which runs them
	// again in a fresh checkout of the committed tree, so files the agent
	// left uncommitted cannot make it pass.
	ValidateIn string `yaml:"validate_in"`
	// Agent names the agent profile loops of this type run on (agent:
	// is DefaultProfile, the others are under agents:); "" = the default.
	Agent string `yaml:"agent,omitempty"`
	// Budget is each loop's own budget (a root's covers its tree).
	Budget Budget `yaml:"budget,omitempty"`
	// Prompt names a prompt template file, relative to the workspace; empty
	// means .loopr/prompts/<type>.md when it exists, else the built-in one.
	Prompt string `yaml:"prompt,omitempty"`
	// TimeoutSecs overrides agent.timeout_secs for this type; 0 inherits it.
	TimeoutSecs int `yaml:"timeout_secs,omitempty"`
	// Tier orders the type before every lower tier; at most Tier loops of
	// tier Tier run at once, all its types together. 0 = no tier.
	Tier int `yaml:"tier,omitempty"`
	// ConflictGroup: loops of types of one group with the same conflict_key
	// never run at once. "" = none.
	ConflictGroup string `yaml:"conflict_group,omitempty"`
	// DefaultCost is the cost, in seconds of wall time, charged to a
	// fairness key for a loop of this type until its cost is learned;
	// 0 = DefaultCost.
	DefaultCost int `yaml:"default_cost,omitempty"`
	// RequireChanges fails an iteration that passes but leaves no commit
	// and no diff against its starting commit ("no changes were made").
	// Read for ralph loops in a git worktree.
	RequireChanges bool `yaml:"require_changes,omitempty"`
	// RequireReview makes a loop of this type that changes code on its
	// own branch wait in awaiting_review when it passes, with its commit
	// and evidence, for `loopr approve` (merge), `reject` or `iterate`.
	RequireReview bool `yaml:"require_review,omitempty"`
	// WorkerLabels: on an etcd store with several workers, loops of this
	// type run only on workers whose worker.labels include all of these.
	WorkerLabels []string `yaml:"worker_labels,omitempty"`
	// Children orders the children an artifact of this type spawns when
	// their sections say nothing (no **Depends on:** line): Parallel, all
	// at once, or Sequential, each after the one before it is done.
	Children string `yaml:"children,omitempty"`
	// Hooks, when it names any hook, replaces the top-level hooks: for
	// loops of this type, only these run.
	Hooks map[string]Hook `yaml:"hooks,omitempty"`
	// Fanout runs each loop of this type as that many candidates in
	// parallel worktrees, of which one merges (best-of-N, package
	// fanout); 0 or 1 = one loop. A task's **Fanout:** line and `loopr
	// add --fanout` override it.
	Fanout int `yaml:"fanout,omitempty"`
	// FanoutPick chooses the winner: fanout.PickFirst ("" too),
	// PickSmallestDiff or PickJudge.
	FanoutPick string `yaml:"fanout_pick,omitempty"`
	// FanoutJudge is the judge command (argv) of fanout_pick: judge.
	FanoutJudge []string `yaml:"fanout_judge,omitempty"`
}

// The values of loops.<type>.children.
const (
	Parallel   = "parallel"
	Sequential = "sequential"
)

// TypePolicy is the scheduling policy of a type (seed 002): loops.<type>
// or types.<type> tier, conflict_group and default_cost.
type TypePolicy struct {
	Tier          int
	ConflictGroup string
	DefaultCost   int
}

// DefaultCost is the cost of a loop whose type sets default_cost 0: 60
// seconds, the scheduler's default.
const DefaultCost = 60

// Timeout returns TimeoutSecs as a duration.
func (s LoopSettings) Timeout() time.Duration { return time.Duration(s.TimeoutSecs) * time.Second }

// TypeSettings is one entry of `types:`: a user-defined loop type. User types
// are leaves: their loops spawn no children.
type TypeSettings struct {
	Base       int `yaml:"base"`        // base priority
	MaxRunning int `yaml:"max_running"` // 0 means no per-type cap
	// The keys of loops.<type>, at the same level: max_iterations, validate, …
	LoopSettings `yaml:",inline"`
}

// DefaultTypeSettings returns the settings a user type starts from before its
// entry in `types:` is applied: base priority 50 (between plan and spec), no
// per-type cap, 10 iterations, no approval, no validation commands, and the
// agent section's command and timeout.
func DefaultTypeSettings() TypeSettings {
	return TypeSettings{Base: 50, LoopSettings: LoopSettings{MaxIterations: 10, ValidateIn: ValidateInWorktree}}
}

func (t TypeSettings) loopSettings() LoopSettings { return t.LoopSettings }

// Git is the `git:` section.
type Git struct {
	// Worktrees gives each loop a git worktree and branch
	// loopr/<slug>-<short-id> when the workspace is a git repository;
	// without, loops share the workspace and leaf loops run one at a time.
	Worktrees bool `yaml:"worktrees"`
	// Remote names the git remote (e.g. origin) that daemons on several
	// machines share branches through: each fetches before a loop starts,
	// pushes the loop's branch after every iteration, and merges into the
	// plan branch on the remote under an etcd lock. "" = the local
	// repository only (every worker must then work in the same one).
	Remote string `yaml:"remote"`
}

// Merge is the `merge:` section: how passed loops' branches land on their
// plan branch (the merge queue, package mergequeue), and how a loop's
// branch keeps up with it.
type Merge struct {
	// Validate lists shell commands (sh -c) run in the integration
	// worktree on the result of the merge, before the plan branch moves;
	// one failing leaves the plan branch where it was and sends the loop
	// back with the output.
	Validate []string `yaml:"validate"`
	// Batch is how many passed branches are merged and validated together
	// at most; a failing batch is split in halves until the branch that
	// breaks it is found.
	Batch int `yaml:"batch"`
	// Refresh is how, before each iteration, the plan branch's current
	// tip is brought into the branch of a loop that has its own:
	// RefreshMerge, RefreshRebase or RefreshOff.
	Refresh string `yaml:"refresh"`
}

// MaxMergeBatch bounds merge.batch.
const MaxMergeBatch = 256

// How a loop's branch is refreshed from its plan branch (merge.refresh).
const (
	RefreshMerge  = "merge"
	RefreshRebase = "rebase"
	RefreshOff    = "off"
)

// Where validation runs (loops.<type>.validate_in).
const (
	ValidateInWorktree = "worktree"
	ValidateInClean    = "clean"
)

// Worker is the `worker:` section: this daemon as one of the workers that
// share an etcd store (docs/several-machines.md). Read at the daemon's
// start; ignored on the bbolt file.
type Worker struct {
	// Name identifies the worker among those of the store; "" = the host
	// name and a short hash of the home directory.
	Name string `yaml:"name"`
	// MaxLoops is how many loops this worker runs at once; 0 = the global
	// cap concurrency.max_loops.
	MaxLoops int `yaml:"max_loops"`
	// Labels describe the worker; a type's worker_labels must all be here
	// for its loops to run on it.
	Labels []string `yaml:"labels"`
	// LeaseTTLSecs is the etcd lease the worker keeps alive, holding its
	// registration, the leases of its loops and its bid to be the
	// scheduler: this long after a worker dies, its loops go back to
	// pending and another worker may become the scheduler.
	LeaseTTLSecs int `yaml:"lease_ttl_secs"`
}

// Storage is the `storage:` section.
type Storage struct {
	// DiskQuotaMinGB is the free space below which no new loop starts
	// (reason disk_low); 0 disables the check.
	DiskQuotaMinGB float64 `yaml:"disk_quota_min_gb"`
}

// Store is the `store:` section: where the daemon keeps its records. Read
// at the daemon's start.
type Store struct {
	// Backend is "bbolt" (the file <home>/loopr.db, the default) or
	// "etcd" (Etcd says where).
	Backend string    `yaml:"backend"`
	Etcd    StoreEtcd `yaml:"etcd"`
}

// StoreEtcd is `store.etcd`: the etcd cluster and the key prefix of this
// store. Daemons that share endpoints and prefix share the store.
type StoreEtcd struct {
	Endpoints       []string `yaml:"endpoints"`         // client URLs, e.g. http://10.0.0.1:2379
	Prefix          string   `yaml:"prefix"`            // every key starts with it; "" = /loopr/<workspace directory name>
	DialTimeoutSecs int      `yaml:"dial_timeout_secs"` // how long to wait for etcd at start, and for any one request after
	Username        string   `yaml:"username"`          // etcd user, with password; "" = no authentication
	Password        string   `yaml:"password"`
	CAFile          string   `yaml:"ca_file"`   // TLS: the CA that signed etcd's certificate; relative to this file
	CertFile        string   `yaml:"cert_file"` // TLS client certificate, with key_file
	KeyFile         string   `yaml:"key_file"`
}

// StorePath resolves a store.etcd file path against the configuration
// file's directory, as TokenPath does.
func (c *Config) StorePath(p string) string {
	if p == "" || filepath.IsAbs(p) || c.File == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// Retention is the `retention:` section: how long finished loops are kept.
type Retention struct {
	// Days keeps a terminal loop (complete, failed, cancelled, expired,
	// invalidated) this many days after it finished; the daemon's cleaner
	// and `loopr gc` remove older ones with their directories and journal
	// entries. 0 keeps every loop forever.
	Days int `yaml:"days"`
}

// API is the `api:` section: an optional TCP listener for the daemon's
// API besides the unix socket. The socket trusts its peer's uid; TCP has
// no such check, so every request must carry the token of TokenFile as
// `Authorization: Bearer <token>`. Both take effect at the daemon's start.
type API struct {
	// Listen is a host:port to serve the API on, e.g. "127.0.0.1:7070";
	// "" serves the socket only.
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token (required with Listen). A relative
	// path is relative to the configuration file's directory. The daemon
	// refuses to start when the file is readable by other users.
	TokenFile string `yaml:"token_file"`
	// Web serves the web dashboard (package web, docs/web.md): on Listen
	// when set, else on WebListen.
	Web bool `yaml:"web"`
	// WebListen is where the dashboard listens when Listen is "" (host:port;
	// "" = 127.0.0.1:0, a free loopback port). A non-loopback address
	// needs TokenFile.
	WebListen string `yaml:"web_listen"`
}

// TokenPath returns TokenFile resolved against the configuration file's
// directory (the workspace), or "" when unset.
func (c *Config) TokenPath() string {
	p := c.API.TokenFile
	if p == "" || filepath.IsAbs(p) || c.File == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// Webhook is one entry of `webhooks:`: a receiver the daemon POSTs loop
// events to, as JSON.
type Webhook struct {
	URL    string   `yaml:"url"`    // http or https
	Events []string `yaml:"events"` // names from WebhookEvents
}

// Notify is the `notify:` section.
type Notify struct {
	// Command is an argv (no shell) run once per event with LOOPR_EVENT,
	// LOOPR_LOOP_ID, LOOPR_TITLE, LOOPR_REASON and LOOPR_ACTION in its
	// environment, at most NotifyTimeout each; empty = none.
	Command []string `yaml:"command"`
}

// NotifyTimeout bounds one run of notify.command; it is then killed.
const NotifyTimeout = 10 * time.Second

// WebhookEvents lists the event names a webhook may subscribe to: "created",
// each status a loop moves to, and "rate_limited" (the loop's agent was
// rate limited and it waits for the shared backoff).
var WebhookEvents = []string{
	"created", string(loop.Pending), string(loop.Paused), string(loop.Running),
	string(loop.Merging), string(loop.AwaitingApproval), string(loop.AwaitingReview), string(loop.Complete), string(loop.Failed),
	string(loop.Cancelled), string(loop.Expired), string(loop.Invalidated), "rate_limited",
	string(loop.NeedsHuman), "tree_complete",
}

// Default returns the configuration used when loopr.yml sets nothing
// (SPEC §5). Each call returns a new value.
func Default() *Config {
	return &Config{
		Scheduler: Scheduler{
			PollIntervalSecs: 1,
			Priority: Priority{
				Plan: 40, Spec: 60, Phase: 80, Ralph: 100,
				AgeBoostPerMinute: 1, AgeBoostMax: 50,
				DepthBoostPerLevel:       10,
				RetryPenaltyPerIteration: 5, RetryPenaltyMax: 30,
				TreeBoostMax: 20, TreeAgeBoostPerMinute: 1, TreeAgeBoostMax: 960, // tuned with loopr sim: docs/design.md
			},
			Fairness: Fairness{Enabled: false, Alpha: 0.3, IdleTTLSecs: 3600},
		},
		Concurrency: Concurrency{
			MaxLoops: 50, MaxAPICalls: 10,
			PerType: PerType{Plan: 2, Spec: 5, Phase: 20, Ralph: 50},
		},
		RateLimit: RateLimit{
			InitialBackoffSecs: 5, MaxBackoffSecs: 120,
			RecoveryPeriodSecs: 30, MaxConcurrentAPICalls: 10,
			MaxConsecutive: 20, NotifyAfterSecs: 3600,
		},
		Retry: Retry{BackoffBaseSecs: 2, BackoffFactor: 2, BackoffMaxSecs: 60, NoProgressLimit: 3, TransientMax: 3},
		Agent: DefaultAgent(),
		Loops: map[string]LoopSettings{
			loop.Plan:  {MaxIterations: 10, RequireApproval: true, Children: Parallel, ValidateIn: ValidateInWorktree},
			loop.Spec:  {MaxIterations: 25, Children: Sequential, ValidateIn: ValidateInWorktree},
			loop.Phase: {MaxIterations: 50, Children: Parallel, ValidateIn: ValidateInWorktree},
			loop.Ralph: {MaxIterations: 100, Validate: []string{"go test ./..."}, ValidateIn: ValidateInWorktree, ConflictGroup: "code", RequireChanges: true, Children: Parallel},
		},
		Git:       Git{Worktrees: true},
		Merge:     Merge{Batch: 1, Refresh: RefreshMerge},
		Storage:   Storage{DiskQuotaMinGB: 5},
		Store:     Store{Backend: "bbolt", Etcd: StoreEtcd{DialTimeoutSecs: 5}},
		Worker:    Worker{LeaseTTLSecs: 15},
		Retention: Retention{Days: 30},
	}
}

func builtin(t string) bool { return slices.Contains(loop.BuiltinTypes, t) }

// Types returns every loop type: the built-in types in hierarchy order, then
// the user types sorted by name.
func (c *Config) Types() []string {
	ts := slices.Clone(loop.BuiltinTypes)
	for _, t := range slices.Sorted(maps.Keys(c.UserTypes)) {
		if !builtin(t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// KnownType reports whether t is a built-in type or a type defined under `types:`.
func (c *Config) KnownType(t string) bool {
	_, user := c.UserTypes[t]
	return builtin(t) || user
}

// Base returns the base priority of type t: scheduler.priority.<t> for a
// built-in type, types.<t>.base for a user type, 0 for an unknown type.
func (c *Config) Base(t string) int {
	p := c.Scheduler.Priority
	switch t {
	case loop.Plan:
		return p.Plan
	case loop.Spec:
		return p.Spec
	case loop.Phase:
		return p.Phase
	case loop.Ralph:
		return p.Ralph
	}
	return c.UserTypes[t].Base
}

// TypeCap returns how many loops of type t may run at once:
// concurrency.per_type.<t> for a built-in type, types.<t>.max_running for a
// user type. 0 means no per-type cap (max_loops still applies).
func (c *Config) TypeCap(t string) int {
	p := c.Concurrency.PerType
	switch t {
	case loop.Plan:
		return p.Plan
	case loop.Spec:
		return p.Spec
	case loop.Phase:
		return p.Phase
	case loop.Ralph:
		return p.Ralph
	}
	return c.UserTypes[t].MaxRunning
}

// Policy returns the scheduling policy of type t (tier, conflict group,
// default cost): loops.<t> for a built-in type, types.<t> for a user type.
// DefaultCost is resolved (0 → DefaultCost); an unknown type has no tier
// and no group.
func (c *Config) Policy(t string) TypePolicy {
	var p TypePolicy
	if builtin(t) {
		s := c.Loops[t]
		p = TypePolicy{Tier: s.Tier, ConflictGroup: s.ConflictGroup, DefaultCost: s.DefaultCost}
	} else {
		u := c.UserTypes[t]
		p = TypePolicy{Tier: u.Tier, ConflictGroup: u.ConflictGroup, DefaultCost: u.DefaultCost}
	}
	if p.DefaultCost == 0 {
		p.DefaultCost = DefaultCost
	}
	return p
}

// Loop returns the settings of type t with the inherited values resolved:
// Agent falls back to DefaultProfile and TimeoutSecs to the timeout_secs of
// that profile. Prompt stays "" when the type names no template. The slices
// are copies. For an unknown type only the inherited values are set.
func (c *Config) Loop(t string) LoopSettings {
	var s LoopSettings
	if builtin(t) {
		s = c.Loops[t]
	} else if u, ok := c.UserTypes[t]; ok {
		s = u.loopSettings()
	}
	s.Validate = slices.Clone(s.Validate)
	s.FanoutJudge = slices.Clone(s.FanoutJudge)
	if s.ValidateIn == "" {
		s.ValidateIn = ValidateInWorktree
	}
	if s.Agent == "" {
		s.Agent = DefaultProfile
	}
	if s.TimeoutSecs == 0 {
		a, _ := c.Profile(s.Agent)
		s.TimeoutSecs = a.TimeoutSecs
	}
	return s
}

// Profile returns the agent profile called name: DefaultProfile is
// `agent:`, the others are entries of `agents:`.
func (c *Config) Profile(name string) (Agent, bool) {
	if name == DefaultProfile || name == "" {
		return c.Agent, true
	}
	a, ok := c.Agents[name]
	return a, ok
}

// Profiles returns the names of every agent profile: DefaultProfile, then
// the entries of `agents:` by name.
func (c *Config) Profiles() []string {
	return append([]string{DefaultProfile}, slices.Sorted(maps.Keys(c.Agents))...)
}

// ProfileOf returns the profile a loop runs on: its own (agent, from
// --agent) when the configuration still defines it, else its type's.
func (c *Config) ProfileOf(l *loop.Loop) string {
	if l.Agent != "" {
		if _, ok := c.Profile(l.Agent); ok {
			return l.Agent
		}
	}
	return c.Loop(l.Type).Agent
}

// BudgetFor returns the budget a new loop of type t gets when its creator
// sets none: loops.<t>.budget, else, for a root, the tree default budget.
func (c *Config) BudgetFor(t string, root bool) loop.Budget {
	var b Budget
	if builtin(t) {
		b = c.Loops[t].Budget
	} else {
		b = c.UserTypes[t].Budget
	}
	if b == (Budget{}) && root {
		b = c.Budget
	}
	return b.Loop()
}

// APICallCap returns how many agent processes may run at once: the smaller of
// concurrency.max_api_calls and rate_limit.max_concurrent_api_calls, which
// name the same limit.
func (c *Config) APICallCap() int {
	return min(c.Concurrency.MaxAPICalls, c.RateLimit.MaxConcurrentAPICalls)
}

// PollInterval returns scheduler.poll_interval_secs as a duration.
func (c *Config) PollInterval() time.Duration {
	return time.Duration(c.Scheduler.PollIntervalSecs) * time.Second
}
