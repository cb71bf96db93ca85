package preset

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSessionOfCapturedOutput reads the session id of each CLI's captured
// output (testdata/README.md).
func TestSessionOfCapturedOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, want string
	}{
		{Claude, "claude-2.1.332/ok.jsonl", "2327b066-ddc3-49ea-84d5-21dfb78504df"},
		{Codex, "codex-0.171.0/tools.jsonl", "01a21e0c-91cb-70c0-a99c-087531a92fbd"},
		{Gemini, "gemini-0.61.0/ok.jsonl", "f81fd"},
		{OpenCode, "opencode-1.18.33/ok.jsonl", "ses_de28c004ffferZ1KaNOdOCo2H6"},
		{Codex, "codex-0.171.0/no-rollout.txt", ""},
	} {
		out, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := Session(tc.name, out, nil)
		if tc.name == Gemini && len(got) > 5 {
			got = got[:5] // the capture's id, whatever its tail
		}
		if got != tc.want {
			t.Errorf("Session(%s, %s) = %q, want %q", tc.name, tc.file, got, tc.want)
		}
	}
}

func TestSessionPattern(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^session: (\S+)$`)
	out := []byte("starting\nsession: abc-123\nwork\n")
	if got := Session(Command, out, re); got != "abc-123" {
		t.Errorf("Session(command) = %q, want abc-123", got)
	}
	if got := Session(Command, out, nil); got != "" {
		t.Errorf("Session(command, no pattern) = %q, want none", got)
	}
	// What goes on a command line is checked.
	if got := Session(Command, []byte("session: --evil;rm\n"), re); got != "" {
		t.Errorf("Session(command, a flag) = %q, want none", got)
	}
}

// TestUnknownSession: what the real CLIs print when asked to resume a
// session they do not have (captured offline, testdata/README.md).
func TestUnknownSession(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"claude-2.1.332/no-conversation.jsonl", "codex-0.171.0/no-rollout.txt"} {
		out, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := Unknown(out); !strings.Contains(got, "11111111-2222-3333-4444-555555555555") {
			t.Errorf("Unknown(%s) = %q, want the message naming the session", file, got)
		}
	}
	for _, file := range []string{"gemini-0.61.0/no-session.txt", "opencode-1.18.33/no-session.txt"} {
		out, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := Unknown(out); got == "" {
			t.Errorf("Unknown(%s) = none, want the CLI's message", file)
		}
	}
	ok, err := os.ReadFile("testdata/claude-2.1.332/ok.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got := Unknown(ok); got != "" {
		t.Errorf("Unknown(claude ok.jsonl) = %q, want none", got)
	}
}

func TestResumeArgv(t *testing.T) {
	t.Parallel()
	const id = "11111111-2222-3333-4444-555555555555"
	argv := func(name string) []string { p, _ := Get(name); return p.Command }
	for _, tc := range []struct {
		desc, name string
		argv       []string
		resumeArgs []string
		want       []string
		ok         bool
	}{
		{"claude", Claude, argv(Claude), nil, append(argv(Claude), "--resume", id), true},
		{"codex keeps the prompt on stdin", Codex, argv(Codex), nil,
			[]string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "resume", id, "-"}, true},
		{"codex -c config is not a session flag", Codex, []string{"codex", "exec", "-c", "model=x", "-"}, nil,
			[]string{"codex", "exec", "-c", "model=x", "resume", id, "-"}, true},
		{"gemini", Gemini, argv(Gemini), nil, append(argv(Gemini), "--resume", id), true},
		{"opencode", OpenCode, argv(OpenCode), nil, append(argv(OpenCode), "--session", id), true},
		{"command with resume_args", Command, []string{"my-agent", "-p"}, []string{"--resume", "{session}"},
			[]string{"my-agent", "-p", "--resume", id}, true},
		{"command without", Command, []string{"my-agent"}, nil, []string{"my-agent"}, false},
		{"a wrapper is the user's", Claude, []string{"./wrap.sh"}, nil, []string{"./wrap.sh"}, false},
		{"a command that continues already", Claude, []string{"claude", "-p", "--continue"}, nil, []string{"claude", "-p", "--continue"}, false},
	} {
		got, ok := ResumeArgv(tc.name, tc.argv, id, tc.resumeArgs)
		if diff := cmp.Diff(tc.want, got); diff != "" || ok != tc.ok {
			t.Errorf("%s: ResumeArgv() ok = %v, want %v; argv mismatch (-want +got):\n%s", tc.desc, ok, tc.ok, diff)
		}
	}
	if _, ok := ResumeArgv(Claude, argv(Claude), "--evil", nil); ok {
		t.Error("ResumeArgv(claude, a flag as the id) ok = true")
	}
	if got := StartArgv(Claude, argv(Claude), id); !cmp.Equal(got, append(argv(Claude), "--session-id", id)) {
		t.Errorf("StartArgv(claude) = %q", got)
	}
	if got := StartArgv(Codex, argv(Codex), id); !cmp.Equal(got, argv(Codex)) {
		t.Errorf("StartArgv(codex) = %q, want the argv unchanged", got)
	}
}

func TestAttachArgv(t *testing.T) {
	t.Parallel()
	const id = "11111111-2222-3333-4444-555555555555"
	for _, tc := range []struct {
		desc, name, id string
		attachArgs     []string
		want           []string
	}{
		{"claude", Claude, id, nil, []string{"claude", "--resume", id}},
		{"codex", Codex, id, nil, []string{"codex", "resume", id}},
		{"gemini", Gemini, id, nil, []string{"gemini", "--resume", id}},
		{"opencode", OpenCode, id, nil, []string{"opencode", "--session", id}},
		{"no session: the shell", Claude, "", nil, nil},
		{"a flag is no session", Claude, "--evil", nil, nil},
		{"command: the shell", Command, id, nil, nil},
		{"command with attach_args", Command, "", []string{"./take-over.sh", "-i"}, []string{"./take-over.sh", "-i"}},
		{"attach_args with the session", Command, id, []string{"my-agent", "--resume={session}"}, []string{"my-agent", "--resume=" + id}},
		{"attach_args naming a session there is not", Claude, "", []string{"claude", "-r", "{session}"}, nil},
		{"attach_args replace a preset's", Claude, id, []string{"/opt/claude", "--resume", "{session}"}, []string{"/opt/claude", "--resume", id}},
	} {
		if diff := cmp.Diff(tc.want, AttachArgv(tc.name, tc.id, tc.attachArgs)); diff != "" {
			t.Errorf("%s: AttachArgv() mismatch (-want +got):\n%s", tc.desc, diff)
		}
	}
}
