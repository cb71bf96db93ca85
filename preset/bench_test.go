package preset

import (
	"strings"
	"testing"
)

// BenchmarkParseClaude4MiB: the runner parses the whole bounded agent.log
// (4 MiB by default) once per iteration.
func BenchmarkParseClaude4MiB(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 4<<20 {
		sb.WriteString(claudeText + "\n")
	}
	sb.WriteString(claudeOK + "\n")
	out := []byte(sb.String())
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if r := Parse(Claude, out, 0, now, defaultPattern); r.Usage.CostUSD == 0 {
			b.Fatal("no usage")
		}
	}
}

// BenchmarkParseText4MiB: a failed run of a text agent.
func BenchmarkParseText4MiB(b *testing.B) {
	out := []byte(strings.Repeat("compiling package foo/bar: ok\n", (4<<20)/30) + "You've hit your limit · resets 5pm (UTC)\n")
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if r := Parse(Command, out, 1, now, defaultPattern); !r.Limited {
			b.Fatal("not limited")
		}
	}
}
