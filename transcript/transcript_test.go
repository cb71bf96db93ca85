package transcript

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestIncremental: fed in pieces of any size, a stream renders as it does
// whole, and a partial line is held until its end.
func TestIncremental(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../preset/testdata/*/*.jsonl")
	for _, f := range files {
		out, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _, _ := strings.Cut(filepath.Base(filepath.Dir(f)), "-")
		want := Render(name, out)
		for _, step := range []int{1, 7, 4096} {
			r := New(name)
			var got []Line
			for p := out; len(p) > 0; {
				n := min(step, len(p))
				got = append(got, r.Feed(p[:n])...)
				p = p[n:]
			}
			got = append(got, r.Flush()...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s fed %d bytes at a time: mismatch (-whole +pieces):\n%s", f, step, diff)
			}
		}
	}
	r := New("claude")
	if got := r.Feed([]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"hel`)); len(got) != 0 {
		t.Errorf("a partial line rendered: %v", got)
	}
	got := r.Feed([]byte("lo\"}]}}\n"))
	if want := []Line{{Kind: Text, Text: "hello"}}; !cmp.Equal(got, want) {
		t.Errorf("completed line = %v, want %v", got, want)
	}
}

// TestSniff: without a preset the format comes from the first events; a
// line that is not an event passes through.
func TestSniff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string
	}{
		{"claude", `{"type":"assistant","session_id":"s","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"go test ./..."}}]}}`,
			[]string{"▸ Bash  go test ./..."}},
		{"codex", `{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"hi"}}`,
			[]string{"hi"}},
		{"gemini", `{"type":"init","timestamp":"2026-11-27T14:39:52.105Z","session_id":"s","model":"auto"}` + "\n" +
			`{"type":"tool_use","timestamp":"x","tool_name":"read_file","tool_id":"1","parameters":{"absolute_path":"/r/a.go"}}`,
			[]string{"● gemini · model auto", "▸ read_file  /r/a.go"}},
		{"opencode", `{"type":"text","timestamp":1,"sessionID":"s","part":{"type":"text","text":"hi"}}`, []string{"hi"}},
		{"plain text", "make: *** [test] Error 1\n{not json}\n{\"no\":\"type\"}", []string{"make: *** [test] Error 1", "{not json}", `{"no":"type"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, l := range Render("command", []byte(tt.in)) {
				got = append(got, l.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Render(sniffed) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSniffWinsOverPreset: a profile whose preset changed since the run
// (or a command running another CLI) still renders; an event type a later
// release adds shows as it was.
func TestSniffWinsOverPreset(t *testing.T) {
	t.Parallel()
	in := `{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"hi"}}` +
		"\n" + `{"type":"turn.new_thing","x":1}`
	got := Render("claude", []byte(in))
	want := []Line{{Kind: Text, Text: "hi"}, {Kind: Raw, Text: `{"type":"turn.new_thing","x":1}`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Render(claude preset, codex output) mismatch (-want +got):\n%s", diff)
	}
}

// TestToolSummaries: each tool call is one line with a short summary of
// its arguments, file paths relative to the working directory.
func TestToolSummaries(t *testing.T) {
	t.Parallel()
	r := New("claude")
	r.Dir = "/w/repo"
	in := []string{
		`{"name":"Edit","input":{"file_path":"/w/repo/cli/root.go","old_string":"a","new_string":"b"}}`,
		`{"name":"Bash","input":{"command":"cat <<'EOF' > x\nline\nEOF","description":"write x"}}`,
		`{"name":"Grep","input":{"pattern":"func New","path":"/w/repo/tui"}}`,
		`{"name":"TodoWrite","input":{"todos":[{"content":"a"}]}}`,
		`{"name":"Mystery","input":{"zeta":"last","alpha":"first"}}`,
	}
	var got []string
	for _, b := range in {
		for _, l := range r.Feed([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use",` + b[1:] + `]}}` + "\n")) {
			got = append(got, l.String())
		}
	}
	want := []string{"▸ Edit  cli/root.go", "▸ Bash  cat <<'EOF' > x …", "▸ Grep  func New  in tui", "▸ TodoWrite", "▸ Mystery  alpha: first"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool lines mismatch (-want +got):\n%s", diff)
	}
	if got, want := unwrapShell(`/bin/bash -lc "printf 'a\\n' > \"x y\""`), `printf 'a\n' > "x y"`; got != want {
		t.Errorf("unwrapShell = %q, want %q", got, want)
	}
}

// TestHostile: escapes are neutralised, a huge line is counted and cut
// without being held, deep nesting and invalid UTF-8 do no harm.
func TestHostile(t *testing.T) {
	t.Parallel()
	if got, want := Render("command", []byte("\x1b[93m\x1b[1m!\x1b[0m Clear \x1b[2J screen\x1b[\n")), []Line{{Kind: Raw, Text: `! Clear \x1b[2J screen\x1b[`}}; !cmp.Equal(got, want) {
		t.Errorf("colours are stripped, other sequences escaped: got %q, want %q", got, want)
	}
	evil := `{"type":"assistant","message":{"content":[{"type":"text","text":"\u001b]52;c;aGk=\u0007\u001b[2Jred \u001b[31mX\u001b[0m \u202e"}]}}`
	for _, l := range Render("claude", []byte(evil+"\nraw \x1b]0;title\x07 \x9b31m line\n")) {
		if strings.ContainsAny(l.Text, "\x1b\x07\u009b\u202e") {
			t.Errorf("line %q keeps a terminal control", l.Text)
		}
	}

	r := New("claude")
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var got []Line
	got = append(got, r.Feed([]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"`))...)
	for range 100 { // 100 MB on one line
		got = append(got, r.Feed(chunk)...)
		if cap(r.buf) > 2*MaxLine {
			t.Fatalf("the renderer holds %d bytes of one line", cap(r.buf))
		}
	}
	got = append(got, r.Feed([]byte("\"}]}}\nafter\n"))...)
	want := []Line{{Kind: Raw, Text: "… (a line of 104.9 MB, too long to show)"}, {Kind: Raw, Text: "after"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("huge line mismatch (-want +got):\n%s", diff)
	}

	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	for _, l := range Render("claude", []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"T","input":`+deep+`}]}}`+"\n"+deep)) {
		if len(l.Text) > 4*MaxLine {
			t.Errorf("a line of %d bytes", len(l.Text))
		}
	}
	bad := Render("codex", []byte("{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"ok \xff\xfe\"}}\n\xff\xfe raw\n"))
	for _, l := range bad {
		if !utf8.ValidString(l.Text) {
			t.Errorf("line %q is not valid UTF-8", l.Text)
		}
	}
	if len(bad) != 2 || !strings.HasPrefix(bad[0].Text, "ok ") {
		t.Errorf("invalid UTF-8: got %v, want the message and the raw line", bad)
	}
}

// FuzzRender: no input panics, every line is one valid line without a
// terminal control, and feeding in pieces renders as feeding whole.
func FuzzRender(f *testing.F) {
	files, _ := filepath.Glob("../preset/testdata/*/*.jsonl")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 20000 {
			f.Add(b, uint8(0), uint16(13))
		}
	}
	f.Add([]byte("{\"type\":\"result\",\"is_error\":true,\"result\":\"\x1b[2J\"}\n"), uint8(1), uint16(1))
	f.Add([]byte(`{"type":"message","timestamp":"t","role":"assistant","content":"a\nb","delta":true}`), uint8(3), uint16(5))
	names := []string{"claude", "codex", "gemini", "opencode", "command"}
	f.Fuzz(func(t *testing.T, in []byte, which uint8, step uint16) {
		name := names[int(which)%len(names)]
		whole := Render(name, in)
		r := New(name)
		var pieces []Line
		n := int(step)%97 + 1
		for p := in; len(p) > 0; {
			k := min(n, len(p))
			pieces = append(pieces, r.Feed(p[:k])...)
			p = p[k:]
		}
		pieces = append(pieces, r.Flush()...)
		if !cmp.Equal(whole, pieces) {
			t.Errorf("pieces of %d render otherwise than whole:\n%v\n%v", n, whole, pieces)
		}
		for _, l := range whole {
			s := l.String()
			if strings.ContainsAny(s, "\n\r\x1b\x07\u009b") || !utf8.ValidString(s) {
				t.Errorf("unsafe line %q", s)
			}
		}
	})
}

// TestEvents: the events the captures lack, one case each.
func TestEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, preset string
		in           []string
		want         []string
	}{
		{"gemini words in pieces", "gemini", []string{
			`{"type":"message","timestamp":"t","role":"assistant","content":"Wrote ","delta":true}`,
			`{"type":"message","timestamp":"t","role":"assistant","content":"the plan.\nNext","delta":true}`,
			`{"type":"message","timestamp":"t","role":"assistant","content":" step.","delta":true}`,
			`{"type":"tool_use","timestamp":"t","tool_name":"run_shell_command","tool_id":"1","parameters":{"command":"make test"}}`,
			`{"type":"tool_result","timestamp":"t","tool_id":"1","status":"error","error":{"type":"x","message":"exit 2"}}`,
		}, []string{"Wrote the plan.", "Next step.", "▸ run_shell_command  make test", "  ✗ exit 2"}},
		{"codex patch and failed turn", "codex", []string{
			`{"type":"item.completed","item":{"id":"i1","type":"file_change","changes":[{"path":"/w/a.go","kind":"update"},{"path":"/w/b.go","kind":"add"}],"status":"completed"}}`,
			`{"type":"item.completed","item":{"id":"i2","type":"reasoning","text":"**Checking the tests**"}}`,
			`{"type":"error","message":"stream error: exceeded retry limit, last status: 429 Too Many Requests"}`,
			`{"type":"turn.failed","error":{"message":"exceeded retry limit"}}`,
		}, []string{"▸ patch  /w/a.go, /w/b.go", "· **Checking the tests**", "✗ stream error: exceeded retry limit, last status: 429 Too Many Requests",
			"✗ exceeded retry limit", "✗ failed"}},
		{"claude retry, limit and failed result", "claude", []string{
			`{"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"session_id":"s"}`,
			`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"},"session_id":"s"}`,
			`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","rateLimitType":"seven_day"},"session_id":"s"}`,
			`{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"Let me see."}]},"session_id":"s"}`,
			`{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: 500","total_cost_usd":1.5,"duration_ms":125000,"session_id":"s"}`,
		}, []string{"✗ API error 529: retrying (attempt 1)", "✗ rate limit reached (seven_day)", "· Let me see.", "✗ API Error: 500", "✗ failed  $1.50 · 2m05s"}},
		{"opencode error", "opencode", []string{
			`{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"APIError","data":{"message":"Rate limit reached"}}}`,
		}, []string{"✗ Rate limit reached"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, l := range Render(tt.preset, []byte(strings.Join(tt.in, "\n")+"\n")) {
				got = append(got, l.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Render mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
