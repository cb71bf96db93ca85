package ratelimit

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // reset times name IANA zones; resolve them on machines without zoneinfo
)

// MaxHint bounds what ParseHint accepts: a hint further than this from now is
// taken for garbage (a stray number, a stale date) rather than a real limit,
// so it cannot park the daemon for years. A month-day reset at most a year
// ahead still fits.
const MaxHint = 366 * 24 * time.Hour

// pastGrace is how far in the past a printed clock time may lie and still
// mean "today": the agent may print "resets 5pm" at 16:59:59 and exit after
// 17:00. Such a hint is returned as it is (already past), not as tomorrow.
const pastGrace = 5 * time.Minute

const monthRe = `(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)`

var (
	// retry-after: 30 · Retry-After: 30 · "retry_after": 30
	retryAfterRe = regexp.MustCompile(`(?i)\bretry[-_ ]?after["']?\s*[:=]\s*["']?(\d+(?:\.\d+)?)`)
	// Retry-After: Wed, 21 Oct 2015 07:28:00 GMT (the HTTP-date form)
	retryAfterDateRe = regexp.MustCompile(`(?i)\bretry[-_ ]?after["']?\s*[:=]\s*["']?((?:mon|tue|wed|thu|fri|sat|sun), \d{2} [a-z]{3} \d{4} \d{2}:\d{2}:\d{2} gmt)`)
	// Retrying in 5 seconds · retrying in 1 second(s) · Retrying in 30s ·
	// try again in 1m30s · resets in 2 hours
	retryInRe         = regexp.MustCompile(`(?i)\b(?:retrying|retry|try again|resets?)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)(?:\(s\)|\b)`)
	retryInCompoundRe = regexp.MustCompile(`(?i)\b(?:retrying|retry|try again|resets?)\s+(?:in|after)\s+((?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ms|s|m|h))\b`)
	// Claude AI usage limit reached|1745438400
	epochRe = regexp.MustCompile(`(?i)usage limit reached\s*\|\s*(\d{9,13})\b`)
	// "resetsAt":1778565600 (claude's rate_limit_event) · "resets_at": 1775317531
	// (codex's usage_limit_reached body): unix epoch seconds (13 digits: ms)
	epochFieldRe = regexp.MustCompile(`(?i)"resets_?at"\s*:\s*"?(\d{9,13})\b`)
	// "resets_in_seconds":602705
	resetsInFieldRe = regexp.MustCompile(`(?i)"resets_in_seconds"\s*:\s*(\d+(?:\.\d+)?)`)
	// try again in 5 days 22 hours 11 minutes · retrying in ~6 days ·
	// resets in 2 days, 3 hours and 4 minutes
	retryInWordsRe = regexp.MustCompile(`(?i)\b(?:retrying|retry|try again|resets?)\s+(?:in|after)\s+~?\s*` +
		`((?:\d+(?:\.\d+)?\s*(?:weeks?|days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+)`)
	wordPartRe = regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)\s*(weeks?|days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
	// Try again at 3:42 PM · try again at Jul 5th, 2026 8:19 PM (codex:
	// `%-I:%M %p` today, else `%b %-d{st|nd|rd|th}, %Y %-I:%M %p`)
	tryAgainAtRe = regexp.MustCompile(`(?i)\btry again at\s+` +
		`(?:` + monthRe + `\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+(?:at\s+)?)?` +
		`(\d{1,2})(?::(\d{2}))?\s*(?:([ap])(?:m\b|\.m\.))?` +
		`(?:\s*\(([a-z][a-z0-9_+\-]*(?:/[a-z0-9_+\-]+)*)\)|\s+(utc|gmt)\b)?`)
	// resets 5pm (Europe/Berlin) · resets Apr 23 at 4pm (America/Recife) ·
	// will reset at 7pm (Asia/Tokyo) · resets at 4:30pm · resets 17:00 (UTC)
	resetRe = regexp.MustCompile(`(?i)\breset(?:s|ting)?\s+(?:at\s+|on\s+)?` +
		`(?:` + monthRe + `\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(?:at\s+)?)?` +
		`(\d{1,2})(?::(\d{2}))?\s*(?:([ap])(?:m\b|\.m\.))?` +
		`(?:\s*\(([a-z][a-z0-9_+\-]*(?:/[a-z0-9_+\-]+)*)\)|\s+(utc|gmt)\b)?`)
	// It resets Mon 9:00am · resets Tuesday at 5pm (UTC): the next such
	// weekday (Claude Code 2.1.332)
	resetWeekdayRe = regexp.MustCompile(`(?i)\breset(?:s|ting)?\s+(?:on\s+)?` +
		`(mon|tue|wed|thu|fri|sat|sun)(?:day|sday|nesday|rsday|urday)?\.?,?\s+(?:at\s+)?` +
		`(\d{1,2})(?::(\d{2}))?\s*(?:([ap])(?:m\b|\.m\.))?` +
		`(?:\s*\(([a-z][a-z0-9_+\-]*(?:/[a-z0-9_+\-]+)*)\)|\s+(utc|gmt)\b)?`)
)

var unitOf = map[string]time.Duration{
	"week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour, "d": 24 * time.Hour,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond, "ms": time.Millisecond,
	"second": time.Second, "seconds": time.Second, "sec": time.Second, "secs": time.Second, "s": time.Second,
	"minute": time.Minute, "minutes": time.Minute, "min": time.Minute, "mins": time.Minute, "m": time.Minute,
	"hour": time.Hour, "hours": time.Hour, "hr": time.Hour, "hrs": time.Hour, "h": time.Hour,
}

// ParseHint finds in an agent's output when its rate limit ends, in the forms
// real agent CLIs print, and returns that instant. Several hints yield the
// latest; none (or only implausible ones, see MaxHint) yield ok = false.
//
// Understood forms (case-insensitive):
//
//	retry-after: 30                          seconds (also Retry-After, retry_after, an HTTP-date)
//	Retrying in 5 seconds                    also "1 second(s)", "30s", "500ms", "2 minutes", "1m30s",
//	                                         "try again in …", "resets in …"
//	usage limit reached|1745438400           unix epoch seconds (13 digits: milliseconds)
//	resets 5pm (Europe/Berlin)               the next 17:00 at or after now in that zone
//	resets Apr 23 at 4pm (America/Recife)    this year's Apr 23, or next year's when already past
//	will reset at 7pm (Asia/Tokyo)           also "4:30pm", "17:00"
//	resets Nov 26, 10:26pm (UTC)             also "Sep 15 at 7pm", "Jul 31, 2am (UTC)"
//	It resets Mon 9:00am                     the next Monday 9:00; also "resets Tuesday at 5pm (UTC)"
//	try again at 3:42 PM                     codex: today (or tomorrow when past)
//	Try again at Jul 5th, 2026 8:19 PM       codex: a full date
//	try again in 5 days 22 hours 11 minutes  also "retrying in ~6 days", "resets in 2 days, 3 hours and 4 minutes"
//	reset after 8h44m7s                      gemini; also "Retrying after 6173ms"
//	"resetsAt":1778565600                    claude's rate_limit_event; also "resets_at" (epoch)
//	"resets_in_seconds":602705               codex's usage_limit_reached body
//
// A clock time without a zone is read in now's location. A clock time up to
// five minutes past is taken as the reset that just happened (the agent
// printed it a moment before it exited), not as tomorrow's; the returned
// instant is then before now, which HitUntil treats as "no announced wait".
// Epoch and HTTP-date hints may likewise lie in the past.
func ParseHint(output string, now time.Time) (until time.Time, ok bool) {
	consider := func(t time.Time) {
		if t.After(now.Add(MaxHint)) || t.Before(now.Add(-MaxHint)) {
			return
		}
		if !ok || t.After(until) {
			until, ok = t, true
		}
	}
	lower := strings.ToLower(output)
	if strings.Contains(lower, "retry") || strings.Contains(lower, "try again") || strings.Contains(lower, "reset") {
		for _, m := range retryAfterRe.FindAllStringSubmatch(output, -1) {
			if d, ok := scale(m[1], time.Second); ok {
				consider(now.Add(d))
			}
		}
		for _, m := range retryAfterDateRe.FindAllStringSubmatch(output, -1) {
			if t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 GMT", strings.ToUpper(m[1])); err == nil {
				consider(t)
			}
		}
		for _, m := range retryInRe.FindAllStringSubmatch(output, -1) {
			if d, ok := scale(m[1], unitOf[strings.ToLower(m[2])]); ok {
				consider(now.Add(d))
			}
		}
		for _, m := range retryInCompoundRe.FindAllStringSubmatch(output, -1) {
			if d, err := time.ParseDuration(strings.ToLower(m[1])); err == nil && d >= 0 {
				consider(now.Add(d))
			}
		}
	}
	if strings.Contains(lower, "retry") || strings.Contains(lower, "try again") || strings.Contains(lower, "reset") {
		for _, m := range retryInWordsRe.FindAllStringSubmatch(output, -1) {
			if d, ok := sumParts(m[1]); ok {
				consider(now.Add(d))
			}
		}
	}
	if strings.Contains(lower, "try again at") {
		for _, m := range tryAgainAtRe.FindAllStringSubmatch(output, -1) {
			if t, ok := tryAgainTime(m, now); ok {
				consider(t)
			}
		}
	}
	if strings.Contains(lower, "resets") {
		for _, m := range epochFieldRe.FindAllStringSubmatch(output, -1) {
			if t, ok := epoch(m[1]); ok {
				consider(t)
			}
		}
		for _, m := range resetsInFieldRe.FindAllStringSubmatch(output, -1) {
			if d, ok := scale(m[1], time.Second); ok {
				consider(now.Add(d))
			}
		}
	}
	if strings.Contains(lower, "usage limit reached") {
		for _, m := range epochRe.FindAllStringSubmatch(output, -1) {
			if t, ok := epoch(m[1]); ok {
				consider(t)
			}
		}
	}
	if strings.Contains(lower, "reset") {
		for _, m := range resetRe.FindAllStringSubmatch(output, -1) {
			if t, ok := resetTime(m, now); ok {
				consider(t)
			}
		}
		for _, m := range resetWeekdayRe.FindAllStringSubmatch(output, -1) {
			if t, ok := weekdayTime(m, now); ok {
				consider(t)
			}
		}
	}
	return until, ok
}

// weekdayTime turns a resetWeekdayRe match into an instant: the first
// occurrence of the clock time, at or after now (less pastGrace), that
// falls on the weekday.
func weekdayTime(m []string, now time.Time) (time.Time, bool) {
	t, ok := resetTime([]string{m[0], "", "", m[2], m[3], m[4], m[5], m[6]}, now)
	if !ok {
		return time.Time{}, false
	}
	prefix := strings.ToLower(m[1])
	for range 7 {
		if strings.ToLower(t.Weekday().String()[:3]) == prefix {
			return t, true
		}
		t = time.Date(t.Year(), t.Month(), t.Day()+1, t.Hour(), t.Minute(), 0, 0, t.Location())
	}
	return time.Time{}, false // unreachable: seven days hold every weekday
}

// epoch reads unix epoch seconds, or milliseconds (Epoch).
func epoch(digits string) (time.Time, bool) {
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return Epoch(n), true
}

// sumParts adds up "5 days 22 hours 11 minutes": each number with its unit.
func sumParts(s string) (time.Duration, bool) {
	var total time.Duration
	parts := wordPartRe.FindAllStringSubmatch(s, -1)
	for _, p := range parts {
		d, ok := scale(p[1], unitOf[strings.ToLower(p[2])])
		if !ok || d > math.MaxInt64-total {
			return 0, false
		}
		total += d
	}
	return total, len(parts) > 0
}

// tryAgainTime turns a tryAgainAtRe match into an instant: with a year, that
// date; else the next occurrence of the clock time, as resetTime does.
func tryAgainTime(m []string, now time.Time) (time.Time, bool) {
	monthName, dayStr, yearStr := m[1], m[2], m[3]
	rest := []string{m[0], "", "", m[4], m[5], m[6], m[7], m[8]}
	if monthName == "" {
		return resetTime(rest, now)
	}
	// A full date: resolve the clock time on that day, in that year.
	year, err := strconv.Atoi(yearStr)
	if err != nil {
		return time.Time{}, false
	}
	rest[1], rest[2] = monthName, dayStr
	t, ok := resetTime(rest, time.Date(year, time.January, 1, 0, 0, 0, 0, now.Location()).Add(pastGrace))
	if !ok || t.Year() != year {
		return time.Time{}, false
	}
	return t, true
}

// scale parses a decimal number of units into a Duration, refusing values
// that would overflow.
func scale(num string, unit time.Duration) (time.Duration, bool) {
	if unit == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	d := f * float64(unit)
	if d >= math.MaxInt64 || math.IsNaN(d) {
		return 0, false
	}
	return time.Duration(d), true
}

// resetTime turns a resetRe match into an instant: the next occurrence, at
// or after now (less pastGrace), of the clock time on the given month-day or
// else on any day, in the named zone or else in now's location.
func resetTime(m []string, now time.Time) (time.Time, bool) {
	monthName, dayStr, hourStr, minStr, ampm, zone, bareZone := m[1], m[2], m[3], m[4], strings.ToLower(m[5]), m[6], m[7]
	if ampm == "" && minStr == "" {
		return time.Time{}, false // "resets 5" is not a time
	}
	hour, _ := strconv.Atoi(hourStr)
	minute := 0
	if minStr != "" {
		minute, _ = strconv.Atoi(minStr)
	}
	switch {
	case minute > 59:
		return time.Time{}, false
	case ampm != "":
		if hour < 1 || hour > 12 {
			return time.Time{}, false
		}
		hour %= 12
		if ampm == "p" {
			hour += 12
		}
	case hour > 23:
		return time.Time{}, false
	}

	loc := now.Location()
	if zone == "" {
		zone = strings.ToUpper(bareZone)
	}
	if zone != "" && zone != "Local" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			return time.Time{}, false // an unknown zone would only make the time up
		}
		loc = l
	}
	earliest := now.Add(-pastGrace)
	local := now.In(loc)

	if monthName == "" {
		y, mo, d := local.Date()
		t := time.Date(y, mo, d, hour, minute, 0, 0, loc)
		if t.Before(earliest) {
			t = time.Date(y, mo, d+1, hour, minute, 0, 0, loc)
		}
		return t, true
	}
	month := monthIndex(monthName)
	day, _ := strconv.Atoi(dayStr)
	for y := local.Year(); y <= local.Year()+1; y++ {
		t := time.Date(y, month, day, hour, minute, 0, 0, loc)
		if t.Day() != day || t.Month() != month {
			continue // Apr 31, or Feb 29 outside a leap year
		}
		if !t.Before(earliest) {
			return t, true
		}
	}
	return time.Time{}, false
}

func monthIndex(name string) time.Month {
	prefix := strings.ToLower(name)[:3]
	for m := time.January; m <= time.December; m++ {
		if strings.ToLower(m.String()[:3]) == prefix {
			return m
		}
	}
	return 0 // unreachable: monthRe only matches month names
}
