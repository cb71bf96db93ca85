package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/loop"
)

func TestPromptFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ  string
		want []string
	}{
		{loop.Plan, []string{"planning agent", "## Feedback on the previous attempt", "`# Plan: <short title>`", "`## Specs`", "`### Spec <n>: <name>`", "plan.md`"}},
		{loop.Spec, []string{"spec agent", "`# Spec: <short title>`", "`## Phases`", "`### Phase <n>: <name>`", "## The plan it belongs to", "spec.md`", "PARENT-MARKER"}},
		{loop.Phase, []string{"phase agent", "`# Phase: <short title>`", "`## Tasks`", "`### Task <n>: <name>`", "## The spec it belongs to", "phase.md`", "PARENT-MARKER"}},
		{loop.Ralph, []string{"coding agent", "## The phase it belongs to", "PARENT-MARKER", "    go test ./...", "must exit 0"}},
		{"review", []string{"review loop", "## Context from the parent loop", "review.md`", "PARENT-MARKER", "    go test ./..."}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, tt.typ, []string{"true"})
			j.Loop.Iteration, j.Loop.MaxIterations = 3, 7
			j.Loop.Title = "Title-" + tt.typ
			j.Loop.Feedback = "FEEDBACK-MARKER with ``` fences"
			j.ParentArtifactText = "PARENT-MARKER"
			j.Settings.Validate = []string{"go test ./..."}
			got, err := PromptFor(j)
			if err != nil {
				t.Fatalf("PromptFor() error: %v", err)
			}
			want := append(tt.want, "iteration 3 of at most 7", j.Loop.Task, "Title-"+tt.typ,
				"````\nFEEDBACK-MARKER with ``` fences\n````")
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("PromptFor(%s) lacks %q; prompt:\n%s", tt.typ, w, got)
				}
			}
		})
	}
}

func TestPromptForFirstTryHasNoFeedbackSection(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{loop.Plan, loop.Spec, loop.Phase, loop.Ralph, "review"} {
		got, err := PromptFor(newJob(t, typ, []string{"true"}))
		if err != nil {
			t.Fatalf("PromptFor(%s) error: %v", typ, err)
		}
		if strings.Contains(got, "previous attempt") || strings.Contains(got, "belongs to") {
			t.Errorf("PromptFor(%s) on a first try of a root mentions feedback or a parent:\n%s", typ, got)
		}
	}
}

// A merge of the plan branch left in conflict before the iteration: the
// prompt names the files and says that loopr's commit concludes it; without
// one, no such section.
func TestPromptForConflicts(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{loop.Ralph, "review"} {
		j := newJob(t, typ, []string{"true"})
		plain, err := PromptFor(j)
		if err != nil {
			t.Fatalf("PromptFor(%s) error: %v", typ, err)
		}
		if strings.Contains(plain, "finish the merge") {
			t.Errorf("PromptFor(%s) without conflicts asks to finish a merge:\n%s", typ, plain)
		}
		j.Refresh = Refresh{From: "loopr/plan-1", Conflicts: []string{"notes.txt", "src/a.go"}}
		got, err := PromptFor(j)
		if err != nil {
			t.Fatalf("PromptFor(%s) error: %v", typ, err)
		}
		for _, w := range []string{"## First: finish the merge of loopr/plan-1", "- notes.txt\n- src/a.go\n", "<<<<<<<", "that commit concludes the merge"} {
			if !strings.Contains(got, w) {
				t.Errorf("PromptFor(%s) lacks %q; prompt:\n%s", typ, w, got)
			}
		}
	}
}

func TestPromptForOverride(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Phase, []string{"true"})
	j.Loop.Feedback = "fb"
	j.ParentArtifact = filepath.Join(t.TempDir(), "spec.md")
	if err := os.WriteFile(j.ParentArtifact, []byte("parent text"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.Settings.PromptFile = filepath.Join(t.TempDir(), "phase.md")
	tmpl := "{{.Type}} {{.LoopID}} {{.Iteration}}/{{.MaxIterations}} {{.Title}} [{{.Task}}] {{.Feedback}} " +
		"{{.Format.Heading}}/{{.Format.Section}}/{{.Format.Child}} {{.ChildType}} {{.ParentArtifactText}}\n{{fenced .Feedback}}"
	if err := os.WriteFile(j.Settings.PromptFile, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := PromptFor(j)
	if err != nil {
		t.Fatalf("PromptFor() error: %v", err)
	}
	want := "phase 01TESTLOOP 1/5 Test phase [Do the phase thing.] fb Phase/Tasks/Task task parent text\n```\nfb\n```"
	if got != want {
		t.Errorf("PromptFor() = %q, want %q", got, want)
	}
}

func TestPromptForErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name   string
		change func(*Job)
		want   string
	}{
		{"missing template", func(j *Job) { j.Settings.PromptFile = filepath.Join(dir, "nope.md") }, "prompt template: open"},
		{"syntax error", func(j *Job) { j.Settings.PromptFile = write("bad.md", "{{.Task") }, "prompt template:"},
		{"unknown field", func(j *Job) { j.Settings.PromptFile = write("field.md", "{{.Nope}}") }, "can't evaluate field Nope"},
		{"missing parent artifact", func(j *Job) { j.ParentArtifact = filepath.Join(dir, "gone.md") }, "parent artifact:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, loop.Ralph, []string{"true"})
			tt.change(&j)
			if _, err := PromptFor(j); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PromptFor() error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestFenced(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain\n", "```\nplain\n```"},
		{"has ``` inside", "````\nhas ``` inside\n````"},
		{"`````x", "``````\n`````x\n``````"},
	}
	for _, tt := range tests {
		if got := fenced(tt.in); got != tt.want {
			t.Errorf("fenced(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPromptCarriesComments: the comments a task waits with are in its
// prompt, file:line, the text and the lines around; answered ones are not.
func TestPromptCarriesComments(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{loop.Ralph, "review"} {
		j := newJob(t, typ, []string{"true"})
		j.Loop.Comments = []loop.Comment{
			{Seq: 1, Path: "old.go", Line: 1, Text: "ANSWERED-MARKER", AnsweredBy: 2, Outcome: "passed"},
			{Seq: 2, Path: "pkg/a.go", Line: 12, Text: "COMMENT-MARKER ``` fence", Commit: "0123456789abcdef", Context: "> 12 | x := 1"},
		}
		got, err := PromptFor(j)
		if err != nil {
			t.Fatalf("PromptFor(%s) error: %v", typ, err)
		}
		for _, w := range []string{"## Comments from a review of your work", "### pkg/a.go:12", "````\nCOMMENT-MARKER ``` fence\n````", "> 12 | x := 1", "commit 0123456789ab"} {
			if !strings.Contains(got, w) {
				t.Errorf("PromptFor(%s) lacks %q; prompt:\n%s", typ, w, got)
			}
		}
		if strings.Contains(got, "ANSWERED-MARKER") {
			t.Errorf("PromptFor(%s) carries an answered comment", typ)
		}
	}
	j := newJob(t, loop.Ralph, []string{"true"})
	if got, _ := PromptFor(j); strings.Contains(got, "## Comments") {
		t.Errorf("PromptFor(no comments) has a comments section")
	}
}
