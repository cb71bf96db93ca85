package ratelimit

import (
	"github.com/go-json-experiment/json/v1"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 4, 20, 12, 0, 0, 0, time.UTC)

func TestBackoffSequence(t *testing.T) {
	t.Parallel()
	// Seed 004 defaults: 5s initial, doubling, capped at 120s.
	var s State
	var got []time.Duration
	for range 7 {
		got = append(got, s.Hit(t0, 0, DefaultConfig()))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 120 * time.Second, 120 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Hit() delays mismatch (-want +got)\n%s", diff)
	}
	if s.Hits != 7 {
		t.Errorf("Hits = %d, want 7", s.Hits)
	}
}

func TestConfigBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    Config
		hits int
		want time.Duration
	}{
		{"no hits", DefaultConfig(), 0, 0},
		{"first", DefaultConfig(), 1, 5 * time.Second},
		{"fourth", DefaultConfig(), 4, 40 * time.Second},
		{"capped", DefaultConfig(), 6, 120 * time.Second},
		{"many hits do not overflow", DefaultConfig(), 1 << 30, 120 * time.Second},
		{"no cap saturates", Config{Initial: time.Second}, 200, time.Duration(1<<63 - 1)},
		{"zero initial", Config{Max: time.Minute}, 3, 0},
		{"initial above max", Config{Initial: time.Hour, Max: time.Minute}, 1, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.c.Backoff(tt.hits); got != tt.want {
				t.Errorf("Backoff(%d) = %v, want %v", tt.hits, got, tt.want)
			}
		})
	}
}

func TestHit(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	tests := []struct {
		name       string
		state      State
		retryAfter time.Duration
		wantDelay  time.Duration
		want       State
	}{
		{
			name:      "first hit",
			wantDelay: 5 * time.Second,
			want: State{Hits: 1, BackoffUntil: t0.Add(5 * time.Second),
				RecoveryUntil: t0.Add(35 * time.Second), LastHit: t0, Since: t0},
		},
		{
			name:       "larger retry-after wins",
			retryAfter: 37 * time.Second,
			wantDelay:  37 * time.Second,
			want: State{Hits: 1, BackoffUntil: t0.Add(37 * time.Second),
				RecoveryUntil: t0.Add(67 * time.Second), LastHit: t0, Since: t0},
		},
		{
			name:       "smaller retry-after loses to the exponential delay",
			state:      State{Hits: 2},
			retryAfter: 3 * time.Second,
			wantDelay:  20 * time.Second,
			want: State{Hits: 3, BackoffUntil: t0.Add(20 * time.Second),
				RecoveryUntil: t0.Add(50 * time.Second), LastHit: t0, Since: t0},
		},
		{
			name:       "retry-after beyond max is honoured",
			retryAfter: time.Hour,
			wantDelay:  time.Hour,
			want: State{Hits: 1, BackoffUntil: t0.Add(time.Hour),
				RecoveryUntil: t0.Add(time.Hour + 30*time.Second), LastHit: t0, Since: t0},
		},
		{
			name:      "a running longer backoff is not shortened",
			state:     State{Hits: 1, BackoffUntil: t0.Add(time.Hour)},
			wantDelay: 10 * time.Second,
			want: State{Hits: 2, BackoffUntil: t0.Add(time.Hour),
				RecoveryUntil: t0.Add(time.Hour + 30*time.Second), LastHit: t0, Since: t0},
		},
		{
			name:       "negative retry-after counts as none",
			retryAfter: -time.Minute,
			wantDelay:  5 * time.Second,
			want: State{Hits: 1, BackoffUntil: t0.Add(5 * time.Second),
				RecoveryUntil: t0.Add(35 * time.Second), LastHit: t0, Since: t0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.state
			if got := s.Hit(t0, tt.retryAfter, c); got != tt.wantDelay {
				t.Errorf("Hit() = %v, want %v", got, tt.wantDelay)
			}
			if diff := cmp.Diff(tt.want, s); diff != "" {
				t.Errorf("Hit() state mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

func TestHitUntil(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	tests := []struct {
		name      string
		until     time.Time
		wantDelay time.Duration
		wantUntil time.Time
	}{
		{"announced reset beyond max", t0.Add(5 * time.Hour), 5 * time.Hour, t0.Add(5 * time.Hour)},
		{"announced reset sooner than the backoff", t0.Add(2 * time.Second), 5 * time.Second, t0.Add(5 * time.Second)},
		{"announced reset already past", t0.Add(-time.Minute), 5 * time.Second, t0.Add(5 * time.Second)},
		{"announced reset at the horizon", t0.Add(Horizon), Horizon, t0.Add(Horizon)},
		// The year 5138 (resetsAt 99999999999), or 58865 (milliseconds
		// read as seconds): not believed, probed again after the backoff.
		{"announced reset beyond the horizon", t0.Add(Horizon + time.Second), 5 * time.Second, t0.Add(5 * time.Second)},
		{"announced reset in the year 5138", time.Unix(99999999999, 0), 5 * time.Second, t0.Add(5 * time.Second)},
		{"announced reset in the year 58865", time.Unix(1795472573000, 0), 5 * time.Second, t0.Add(5 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s State
			if got := s.HitUntil(t0, tt.until, c); got != tt.wantDelay {
				t.Errorf("HitUntil() = %v, want %v", got, tt.wantDelay)
			}
			if !s.BackoffUntil.Equal(tt.wantUntil) {
				t.Errorf("BackoffUntil = %v, want %v", s.BackoffUntil, tt.wantUntil)
			}
		})
	}
}

func TestWindows(t *testing.T) {
	t.Parallel()
	var s State
	s.Hit(t0, 0, DefaultConfig()) // blocked [t0, t0+5s), recovering [t0+5s, t0+35s)
	tests := []struct {
		name           string
		at             time.Duration
		wantBlocked    bool
		wantRemaining  time.Duration
		wantRecovering bool
	}{
		{"at the hit", 0, true, 5 * time.Second, false},
		{"mid backoff", 3 * time.Second, true, 2 * time.Second, false},
		{"backoff ends", 5 * time.Second, false, 0, true},
		{"mid recovery", 20 * time.Second, false, 0, true},
		{"recovery ends", 35 * time.Second, false, 0, false},
		{"long after", time.Hour, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := t0.Add(tt.at)
			if got := s.Blocked(now); got != tt.wantBlocked {
				t.Errorf("Blocked() = %v, want %v", got, tt.wantBlocked)
			}
			if got := s.Remaining(now); got != tt.wantRemaining {
				t.Errorf("Remaining() = %v, want %v", got, tt.wantRemaining)
			}
			if got := s.Recovering(now); got != tt.wantRecovering {
				t.Errorf("Recovering() = %v, want %v", got, tt.wantRecovering)
			}
		})
	}
	if got, want := s.ResumeAt(), t0.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("ResumeAt() = %v, want %v", got, want)
	}
}

func TestZeroState(t *testing.T) {
	t.Parallel()
	var s State
	if s.Blocked(t0) || s.Recovering(t0) || s.Remaining(t0) != 0 || !s.ResumeAt().IsZero() {
		t.Errorf("zero State = %+v: want never limited", s)
	}
}

func TestSuccess(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	var s State
	s.Hit(t0, 0, c)
	s.Hit(t0, 0, c)
	s.Hit(t0, 0, c) // 20s
	s.Success(t0.Add(time.Second))
	// The backoff still runs: the limit's clock (Since) is kept.
	want := State{Hits: 0, BackoffUntil: t0.Add(20 * time.Second), RecoveryUntil: t0.Add(50 * time.Second),
		LastHit: t0, LastSuccess: t0.Add(time.Second), Since: t0}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Success() mismatch (-want +got)\n%s", diff)
	}
	if !s.Blocked(t0.Add(10 * time.Second)) {
		t.Error("Success() cut the running backoff short")
	}
	// The next hit starts again from the initial backoff.
	if got := s.Hit(t0.Add(time.Minute), 0, c); got != 5*time.Second {
		t.Errorf("Hit() after Success() = %v, want 5s", got)
	}
}

func TestStateJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		state State
		want  string
	}{
		{"zero", State{}, `{"hits":0}`},
		{"limited", State{Hits: 2, BackoffUntil: t0, RecoveryUntil: t0.Add(30 * time.Second), LastHit: t0.Add(-10 * time.Second)},
			`{"hits":2,"backoff_until":"2026-04-20T12:00:00Z","recovery_until":"2026-04-20T12:00:30Z","last_hit":"2026-04-20T11:59:50Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.state)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("json.Marshal() mismatch (-want +got)\n%s", diff)
			}
			var back State
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.state, back); diff != "" {
				t.Errorf("round trip mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

// TestLimitedFor: Since marks the start of a run of limits; it survives
// further hits and ends with a success.
func TestLimitedFor(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	var s State
	s.HitUntil(t0, t0.Add(time.Hour), c)
	s.Hit(t0.Add(10*time.Minute), 0, c)
	if !s.Since.Equal(t0) {
		t.Errorf("Since = %v, want the first hit %v", s.Since, t0)
	}
	if got := s.LimitedFor(t0.Add(time.Minute)); got != time.Hour {
		t.Errorf("LimitedFor = %v, want 1h (from the first hit to the announced reset)", got)
	}
	if got := s.LimitedFor(t0.Add(2 * time.Hour)); got != 0 {
		t.Errorf("LimitedFor after the backoff = %v, want 0", got)
	}
	s.Success(t0.Add(2 * time.Hour))
	if !s.Since.IsZero() {
		t.Errorf("Since after a success = %v, want zero", s.Since)
	}
	s.Hit(t0.Add(3*time.Hour), 0, c)
	if !s.Since.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("Since of a new run = %v", s.Since)
	}
}

// TestSuccessDuringBackoffKeepsTheLimitsClock: a run that began before the
// limit and succeeds while the backoff runs resets the hits, but the limit
// still started when it started (notify_after_secs measures from there).
func TestSuccessDuringBackoffKeepsTheLimitsClock(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var s State
	s.HitUntil(t0, t0.Add(time.Hour), c)
	s.Success(t0.Add(time.Second))
	if s.Since != t0 || s.Hits != 0 {
		t.Errorf("after a success during the backoff: since %v hits %d; want since %v, hits 0", s.Since, s.Hits, t0)
	}
	if got := s.LimitedFor(t0.Add(2 * time.Second)); got != time.Hour {
		t.Errorf("LimitedFor = %s; want 1h", got)
	}
	s.Success(t0.Add(2 * time.Hour)) // after the backoff: the limit is over
	if !s.Since.IsZero() {
		t.Errorf("after a success past the backoff: since %v; want zero", s.Since)
	}
}

// TestNoHitBlocksBeyondTheHorizon: with no cap on the exponential backoff
// (max_backoff_secs 0) and any announced wait, however many hits, no hit
// blocks a profile for longer than Horizon.
func TestNoHitBlocksBeyondTheHorizon(t *testing.T) {
	t.Parallel()
	c := Config{Initial: time.Second}
	var s State
	for i := range 100 {
		now := t0.Add(time.Duration(i) * time.Minute)
		retry := []time.Duration{0, time.Hour, 1<<63 - 1, 30 * 24 * time.Hour}[i%4]
		if d := s.Hit(now, retry, c); d > Horizon {
			t.Fatalf("hit %d (retry-after %v): delay %v beyond the horizon", i+1, retry, d)
		}
		if got := s.Remaining(now); got > Horizon {
			t.Fatalf("hit %d: blocked for %v", i+1, got)
		}
	}
}

func TestEpoch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int64
		want time.Time
	}{
		{0, time.Time{}},
		{-5, time.Time{}},
		{1795472573, time.Unix(1795472573, 0)},
		{1795472573000, time.Unix(1795472573, 0)}, // milliseconds
		{1795472573123, time.UnixMilli(1795472573123)},
		{99999999999, time.Unix(99999999999, 0)}, // seconds: the year 5138, for Trusted to refuse
	}
	for _, tt := range tests {
		if got := Epoch(tt.n); !got.Equal(tt.want) {
			t.Errorf("Epoch(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
	if Trusted(t0, Epoch(99999999999)) || Trusted(t0, t0) || !Trusted(t0, t0.Add(Horizon)) || Trusted(t0, t0.Add(Horizon+1)) {
		t.Error("Trusted: want (now, now+Horizon] only")
	}
}
