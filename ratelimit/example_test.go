package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/ratelimit"
)

func ExampleState_Hit() {
	c := ratelimit.DefaultConfig() // 5s initial, 120s max, 30s recovery
	now := time.Date(2026, 4, 20, 12, 0, 0, 0, time.UTC)

	var s ratelimit.State
	var delays []time.Duration
	for range 7 {
		delays = append(delays, s.Hit(now, 0, c))
	}
	fmt.Println(delays)

	// The provider asked for longer than the exponential backoff: it wins.
	s.Success(now)
	fmt.Println(s.Hit(now, 37*time.Second, c))
	// Output:
	// [5s 10s 20s 40s 1m20s 2m0s 2m0s]
	// 37s
}

func ExampleState_Recovering() {
	c := ratelimit.DefaultConfig()
	now := time.Date(2026, 4, 20, 12, 0, 0, 0, time.UTC)

	var s ratelimit.State
	s.Hit(now, 0, c)
	for _, after := range []time.Duration{0, 4 * time.Second, 5 * time.Second, 34 * time.Second, 35 * time.Second} {
		at := now.Add(after)
		fmt.Printf("+%-3v blocked=%-5v remaining=%-3v recovering=%v\n", after, s.Blocked(at), s.Remaining(at), s.Recovering(at))
	}
	// Output:
	// +0s  blocked=true  remaining=5s  recovering=false
	// +4s  blocked=true  remaining=1s  recovering=false
	// +5s  blocked=false remaining=0s  recovering=true
	// +34s blocked=false remaining=0s  recovering=true
	// +35s blocked=false remaining=0s  recovering=false
}

func ExampleParseHint() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	now := time.Date(2026, 4, 20, 18, 30, 0, 0, berlin)
	c := ratelimit.DefaultConfig()

	for _, out := range []string{
		"API Error (429). Retrying in 5 seconds…",
		"You've hit your limit · resets 5pm (Europe/Berlin)", // already past today: tomorrow
		"Weekly limit reached ∙ resets Apr 23 at 4pm (America/Recife)",
		"Claude AI usage limit reached|1776711600",
		"You've hit your usage limit. Try again at Apr 22nd, 2026 9:15 AM.",
		"… try again in 5 days 22 hours 11 minutes.",
		"Your quota will reset after 8h44m7s.",
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1776711600}}`,
		"exit status 1",
	} {
		until, ok := ratelimit.ParseHint(out, now)
		if !ok {
			fmt.Println("no hint: exponential backoff")
			continue
		}
		var s ratelimit.State
		s.HitUntil(now, until, c)
		fmt.Println(until.In(berlin).Format("Mon Jan 2 15:04:05 MST"), "wait", s.Remaining(now))
	}
	// Output:
	// Mon Apr 20 18:30:05 CEST wait 5s
	// Tue Apr 21 17:00:00 CEST wait 22h30m0s
	// Thu Apr 23 21:00:00 CEST wait 74h30m0s
	// Mon Apr 20 21:00:00 CEST wait 2h30m0s
	// Wed Apr 22 09:15:00 CEST wait 38h45m0s
	// Sun Apr 26 16:41:00 CEST wait 142h11m0s
	// Tue Apr 21 03:14:07 CEST wait 8h44m7s
	// Mon Apr 20 21:00:00 CEST wait 2h30m0s
	// no hint: exponential backoff
}
