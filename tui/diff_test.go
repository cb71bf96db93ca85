package tui

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/loopr-dev/loopr/api"
)

// fixtureDiff is "Create users table"'s diff: a new SQL migration, Go code
// with a long line and a tab, a rename, a binary file.
func fixtureDiff() api.Diff {
	ln := func(kind string, old, new int, text string) api.DiffLine {
		return api.DiffLine{Kind: kind, OldLine: old, NewLine: new, Text: text}
	}
	return api.Diff{
		Loop: idUsers, Kind: api.DiffTask,
		From:    api.DiffRef{Branch: "loopr/p-add-oauth-login-109g6ma1", Commit: "1111111111111111111111111111111111111111"},
		To:      api.DiffRef{Branch: "loopr/create-users-table-405df2c6", Commit: "2222222222222222222222222222222222222222"},
		Command: "git diff loopr/p-add-oauth-login-109g6ma1...loopr/create-users-table-405df2c6",
		Added:   14, Removed: 2,
		Files: []api.DiffFile{
			{Path: "db/migrations/0003_users.sql", Status: api.DiffAdded, NewMode: "100644", Added: 5, Hunks: []api.DiffHunk{{
				Header: "@@ -0,0 +1,5 @@", NewStart: 1, NewLines: 5, Lines: []api.DiffLine{
					ln(api.DiffAdd, 0, 1, "CREATE TABLE users ("),
					ln(api.DiffAdd, 0, 2, "    id    INTEGER PRIMARY KEY,"),
					ln(api.DiffAdd, 0, 3, "    email TEXT NOT NULL UNIQUE -- one account per address"),
					ln(api.DiffAdd, 0, 4, "    name  TEXT NOT NULL"),
					ln(api.DiffAdd, 0, 5, ");"),
				}}}},
			{Path: "internal/store/users.go", Status: api.DiffModified, Added: 8, Removed: 2, Hunks: []api.DiffHunk{{
				Header: "@@ -10,6 +10,12 @@ import (", OldStart: 10, OldLines: 6, NewStart: 10, NewLines: 12, Lines: []api.DiffLine{
					ln(api.DiffContext, 10, 10, ")"),
					ln(api.DiffContext, 11, 11, ""),
					ln(api.DiffDel, 12, 0, "// User is a person."),
					ln(api.DiffDel, 13, 0, "type User struct{ ID int }"),
					ln(api.DiffAdd, 0, 12, "// User is a person who signs in with OAuth; Email is unique (see migration 0003_users.sql and the index added next)."),
					ln(api.DiffAdd, 0, 13, "type User struct {"),
					ln(api.DiffAdd, 0, 14, "\tID    int"),
					ln(api.DiffAdd, 0, 15, "\tEmail string"),
					ln(api.DiffAdd, 0, 16, "}"),
					ln(api.DiffAdd, 0, 17, ""),
					ln(api.DiffAdd, 0, 18, "func (u User) String() string { return \"user \" + u.Email }"),
					ln(api.DiffAdd, 0, 19, ""),
					ln(api.DiffContext, 14, 20, "// Store keeps users."),
					ln(api.DiffContext, 15, 21, "type Store struct{ db *sql.DB }"),
				}}}},
			{Path: "internal/store/old_name.go", OldPath: "internal/store/user.go", Status: api.DiffRenamed, Hunks: []api.DiffHunk{}},
			{Path: "docs/erd.png", Status: api.DiffModified, Binary: true, Hunks: []api.DiffHunk{}},
		},
	}
}

func diffFake() *fakeClient {
	fc := newFake()
	fc.diff = map[string]api.Diff{idUsers: fixtureDiff()}
	return fc
}

// runDiffGolden runs the program at w×h (in colour: the ANSI 256 profile,
// so chroma's highlighting shows), opens the diff of "Create users
// table", presses keys, waits for until and compares the final screen.
func runDiffGolden(t *testing.T, w, h int, color bool, until string, keys ...string) {
	t.Helper()
	m := testModel(diffFake())
	if color {
		m.noColor = false
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(termenv.ANSI256)
		m.setStyles(newStyles(r, false))
	}
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
	waitFor(t, tm, "Create user")
	for _, k := range []string{"j", "j", "j", "d"} {
		tm.Send(keyMsg(k))
	}
	waitFor(t, tm, "0003_users.sql") // loaded: keys now act on it
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
	waitFor(t, tm, until)
	tm.Send(keyMsg("q"))
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))
	view := fm.View()
	for i, line := range strings.Split(view, "\n") {
		if n := ansiWidth(line); n > w {
			t.Errorf("line %d is %d cells wide, over %d: %q", i+1, n, w, line)
		}
	}
	if n := strings.Count(view, "\n") + 1; n != h {
		t.Errorf("the screen has %d lines, want %d", n, h)
	}
	golden.RequireEqual(t, []byte(view))
}

// TestGoldenDiff80x24: the diff view in a small terminal, on the Go file
// (tab), the cursor moved onto its long line: cut, never wrapped.
func TestGoldenDiff80x24(t *testing.T) {
	t.Parallel()
	runDiffGolden(t, 80, 24, false, "line 6/15", "tab", "j", "j", "j", "j", "j")
}

// TestGoldenDiff120x35: the diff view with room, in colour: the file
// list, the hunks highlighted by chroma, the gutters.
func TestGoldenDiff120x35(t *testing.T) {
	t.Parallel()
	runDiffGolden(t, 120, 35, true, "file 2/4", "]")
}

// TestDiffView drives the view by Update: loading, files, the cursor,
// errors, closing.
func TestDiffView(t *testing.T) {
	t.Parallel()
	fc := diffFake()
	m := loaded(t, fc, 80, 24)
	m = press(t, m, "j", "j", "j")
	nm, cmd := m.Update(keyMsg("d"))
	m = nm.(Model)
	if !m.diff.open || !m.diff.loading || cmd == nil {
		t.Fatalf("d: open=%v loading=%v cmd=%v, want an open view loading with a command", m.diff.open, m.diff.loading, cmd != nil)
	}
	if !strings.Contains(m.View(), "loading…") {
		t.Errorf("the view while loading does not say loading…:\n%s", m.View())
	}
	m = update(t, m, cmd())
	if len(fc.diffs) != 1 || fc.diffs[0] != idUsers {
		t.Errorf("Diff calls = %v, want [%s]", fc.diffs, idUsers)
	}
	if m.diff.loading || len(m.diff.rows) != 6 { // a hunk header and 5 lines
		t.Fatalf("after the answer: loading=%v rows=%d, want 6 rows", m.diff.loading, len(m.diff.rows))
	}
	// The cursor stays within the file; ] and [ move between files, and
	// stop at the ends.
	m = press(t, m, "G")
	if m.diff.cursor != 5 {
		t.Errorf("G: cursor %d, want 5", m.diff.cursor)
	}
	m = press(t, m, "]", "]", "]", "]")
	if m.diff.file != 3 || !strings.Contains(m.View(), "binary file: not shown") {
		t.Errorf("]×4: file %d, want 3 (the binary file, said so):\n%s", m.diff.file, m.View())
	}
	m = press(t, m, "[")
	if m.diff.file != 2 || !strings.Contains(m.View(), "renamed from internal/store/user.go") {
		t.Errorf("[: file %d, want 2 (the rename, said so):\n%s", m.diff.file, m.View())
	}
	m = press(t, m, "esc")
	if m.diff.open || !strings.Contains(m.View(), "LOOP") {
		t.Errorf("esc: the view is still open:\n%s", m.View())
	}
	// A loop without a diff: the daemon's error, in the view.
	m = press(t, m, "k")
	nm, cmd = m.Update(keyMsg("d"))
	m = update(t, nm.(Model), cmd())
	if !strings.Contains(m.View(), "✗ diff: invalid: loop has no branch yet") {
		t.Errorf("a loop without a diff: the error is not shown:\n%s", m.View())
	}
}

// commentRec records the comments the view sends.
type commentRec struct {
	mu   sync.Mutex
	sent []string
	err  error
}

func (c *commentRec) send(_ context.Context, id, path string, line int, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, strings.Join([]string{id, path, strconv.Itoa(line), text}, " "))
	return c.err
}

// TestDiffComment: c on a line of code opens a prompt; enter sends the
// comment with the file and the new version's line; removed lines, hunk
// headers and empty comments are refused, each saying why.
func TestDiffComment(t *testing.T) {
	t.Parallel()
	fc := diffFake()
	rec := &commentRec{}
	m := loaded(t, fc, 100, 30)
	m.comment = rec.send
	m = press(t, m, "j", "j", "j")
	nm, cmd := m.Update(keyMsg("d"))
	m = update(t, nm.(Model), cmd())
	m = press(t, m, "tab") // the Go file
	m = press(t, m, "c")
	if m.mode != modeNormal || !strings.Contains(m.flash.text, "move to a line of code") {
		t.Errorf("c on the hunk header: mode %v flash %q, want a refusal", m.mode, m.flash.text)
	}
	m = press(t, m, "j", "j", "j") // the first removed line
	m = press(t, m, "c")
	if m.mode != modeNormal || !strings.Contains(m.flash.text, "removed line") {
		t.Errorf("c on a removed line: mode %v flash %q, want a refusal", m.mode, m.flash.text)
	}
	m = press(t, m, "j", "j", "j") // "type User struct {", line 13
	m = press(t, m, "c")
	if m.mode != modeFeedback || !strings.Contains(m.View(), "comment on internal/store/users.go:13:") {
		t.Fatalf("c on a line: no prompt:\n%s", m.View())
	}
	m = press(t, m, "enter")
	if m.mode != modeFeedback || !strings.Contains(m.flash.text, "empty") {
		t.Errorf("an empty comment: mode %v flash %q, want it refused with the prompt still open", m.mode, m.flash.text)
	}
	for _, r := range "add a CreatedAt" {
		m = update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	nm, cmd = m.Update(keyMsg("enter"))
	m = nm.(Model)
	if m.mode != modeNormal || cmd == nil {
		t.Fatalf("enter: mode %v, cmd %v; want the prompt closed and a command", m.mode, cmd != nil)
	}
	m = update(t, m, cmd())
	want := idUsers + " internal/store/users.go 13 add a CreatedAt"
	if len(rec.sent) != 1 || rec.sent[0] != want {
		t.Errorf("comments sent = %q, want [%q]", rec.sent, want)
	}
	if !strings.Contains(m.flash.text, "comment sent on internal/store/users.go:13") || !m.diff.open {
		t.Errorf("after sending: flash %q, open %v", m.flash.text, m.diff.open)
	}
	// A failure is said; a dashboard without comments says what to use.
	rec.err = errors.New("not_found: no route POST /v1/loops/x/comments")
	m = press(t, m, "c")
	m = press(t, m, "x")
	nm, cmd = m.Update(keyMsg("enter"))
	m = update(t, nm.(Model), cmd())
	if !m.flash.err || !strings.Contains(m.flash.text, "no route") {
		t.Errorf("a failed comment: flash %q", m.flash.text)
	}
	m.comment = nil
	m = press(t, m, "c")
	if !strings.Contains(m.flash.text, "use loopr comment") {
		t.Errorf("no Comment: flash %q, want it to name loopr comment", m.flash.text)
	}
}

// TestDiffHighlight: with colour, code is highlighted by its file's lexer
// (a Go keyword gets a colour of its own); without, it stays plain.
func TestDiffHighlight(t *testing.T) {
	t.Parallel()
	m := testModel(diffFake())
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI256)
	m.setStyles(newStyles(r, false))
	got := m.highlight(fileLexer("internal/store/users.go"), "func (u User) String() string {")
	if !strings.Contains(got, "\x1b[") || !strings.Contains(got, "func") {
		t.Errorf("highlight(Go) = %q, want colour escapes", got)
	}
	if plain := m.highlight(fileLexer("notes.unknownext"), "func x"); strings.Contains(plain, "\x1b[38") {
		t.Errorf("highlight(unknown) = %q, want no colour for plain text", plain)
	}
}
