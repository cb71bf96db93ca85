package ratelimit

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDefaultPatternLimitsFile: DefaultPattern matches a line of every
// limit of preset/testdata/limits.txt (the messages of late-2026 CLI
// releases), and no line of its transient errors and ordinary output. Spend
// limits are preset's to tell apart, before the pattern.
func TestDefaultPatternLimitsFile(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(DefaultPattern)
	f, err := os.Open("../preset/testdata/limits.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		verdict, rest, ok := strings.Cut(sc.Text(), "\t")
		if !ok || strings.HasPrefix(verdict, "#") {
			continue
		}
		_, text, _ := strings.Cut(rest, "\t")
		matched := false
		for l := range strings.SplitSeq(text, `\n`) {
			matched = matched || re.MatchString(l)
		}
		switch verdict {
		case "limit":
			n++
			if !matched {
				t.Errorf("DefaultPattern misses %q", text)
			}
		case "none", "transient":
			n++
			if matched {
				t.Errorf("DefaultPattern matches %s %q", verdict, text)
			}
		}
	}
	if err := sc.Err(); err != nil || n < 20 {
		t.Fatalf("read %d cases of limits.txt: %v", n, err)
	}
}

// TestParseHintWeekday: Claude Code 2.1.332's "It resets Mon 9:00am" is
// the next such weekday.
func TestParseHintWeekday(t *testing.T) {
	t.Parallel()
	berlin := mustZone(t, "Europe/Berlin")
	monday := time.Date(2026, 4, 20, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		output string
		now    time.Time
		want   time.Time
	}{
		{"You've hit your weekly limit. It resets Mon 9:00am.", monday, time.Date(2026, 4, 27, 9, 0, 0, 0, time.UTC)},
		{"It resets Mon 5pm (UTC).", monday, time.Date(2026, 4, 20, 17, 0, 0, 0, time.UTC)},
		{"resets Tuesday at 5pm (Europe/Berlin)", monday, time.Date(2026, 4, 21, 17, 0, 0, 0, berlin)},
		{"resets Sun 23:30", monday, time.Date(2026, 4, 26, 23, 30, 0, 0, time.UTC)},
		{"resets Mon 11:58am", monday, time.Date(2026, 4, 20, 11, 58, 0, 0, time.UTC)}, // just past: the reset that happened
		{"resets monthly 5pm", monday, time.Time{}},                                    // not a weekday
		{"resets Mon 9", monday, time.Time{}},                                          // no clock time
	}
	for _, tt := range tests {
		got, ok := ParseHint(tt.output, tt.now)
		if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
			t.Errorf("ParseHint(%q) = %v, %v; want %v", tt.output, got, ok, tt.want)
		}
	}
}
