package runner

import (
	"embed"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"text/template"

	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
)

//go:embed prompts/*.md
var promptFS embed.FS

// PromptData is what a prompt template sees. The embedded defaults and a
// PromptFile override are text/template files over this struct, with the
// functions of PromptFuncs.
type PromptData struct {
	LoopID   string
	Type     string
	Title    string
	Task     string // the user's request (plan) or the child's section of its parent artifact
	Feedback string // why recent iterations failed; "" on a first try
	Answer   string // a person's answer (`loopr answer`) to the loop's question or stop; "" when none
	// Comments are people's line comments on the loop's work that wait
	// for this iteration (`loopr comment`), oldest first: each has Path,
	// Line, Text, Commit and Context (the lines around it, numbered).
	Comments      []loop.Comment
	QuestionFile  string // where the agent writes a question for a person ($LOOPR_QUESTION_FILE)
	Iteration     int
	MaxIterations int
	Artifact      string // where the agent writes its artifact ($LOOPR_ARTIFACT)
	Workdir       string
	Home          string

	ParentArtifact     string // path of the parent's artifact, "" for roots
	ParentArtifactText string // its content

	Validate []string // the commands loopr runs after the agent exits 0

	// Conflicts are the files in which the merge of the plan branch
	// ConflictsFrom into the loop's branch, made before this iteration,
	// conflicts: left with conflict markers for the agent to resolve.
	Conflicts     []string
	ConflictsFrom string

	// Format names the artifact headings for plan, spec and phase loops
	// ({{.Format.Heading}}, {{.Format.Section}}, {{.Format.Child}}); it is
	// zero for types that write no artifact.
	Format    artifact.Format
	ChildType string // the type of loop each section becomes: "spec" for a plan
}

// Refresh is a merge of the plan branch into the loop's branch that loopr
// made before the iteration and left in conflict in the worktree: the
// agent resolves it, and loopr's commit after the iteration concludes it.
type Refresh struct {
	From      string   // the plan branch merged in
	Conflicts []string // the files in conflict; none means no merge is left to finish
}

// PromptFuncs are the functions prompt templates may call:
//
//	fenced TEXT   TEXT in a fenced code block whose fence no line of TEXT can close
var PromptFuncs = template.FuncMap{
	"fenced": fenced,
}

// embedded holds the parsed default templates by type; "default" serves user types.
var embedded = sync.OnceValue(func() map[string]*template.Template {
	m := make(map[string]*template.Template)
	for _, name := range []string{"plan", "spec", "phase", "ralph", "default"} {
		b, err := promptFS.ReadFile("prompts/" + name + ".md")
		if err != nil {
			panic(err) // the embed pattern guarantees the files
		}
		m[name] = template.Must(template.New(name + ".md").Funcs(PromptFuncs).Option("missingkey=error").Parse(string(b)))
	}
	return m
})

// PromptFor renders the prompt for j: the PromptFile override when set, else
// the embedded default for the loop's type. When ParentArtifactText is empty
// and ParentArtifact names a file, the file is read.
func PromptFor(j Job) (string, error) {
	data, err := promptData(j)
	if err != nil {
		return "", err
	}
	tmpl := embedded()[j.Loop.Type]
	if tmpl == nil {
		tmpl = embedded()["default"]
	}
	if p := j.Settings.PromptFile; p != "" {
		// The user's file, possibly behind a symlink; but a regular file,
		// never a FIFO or a /proc file, and bounded.
		b, err := safefile.ReadFollow(p, MaxPromptTemplate)
		if err != nil {
			return "", fmt.Errorf("prompt template: %w", err)
		}
		tmpl, err = template.New(p).Funcs(PromptFuncs).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return "", fmt.Errorf("prompt template: %w", err)
		}
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("prompt template: %w", err)
	}
	return b.String(), nil
}

func promptData(j Job) (PromptData, error) {
	l := j.Loop
	d := PromptData{
		LoopID:             l.ID,
		Type:               l.Type,
		Title:              l.Title,
		Task:               l.Task,
		Feedback:           l.Feedback,
		Answer:             l.Answer,
		Comments:           l.PendingComments(),
		QuestionFile:       filepath.Join(IterationDir(j.Home, l.ID, l.Iteration), QuestionFile),
		Iteration:          l.Iteration,
		MaxIterations:      l.MaxIterations,
		Artifact:           ArtifactPath(j.Home, l),
		Workdir:            j.Workdir,
		Home:               j.Home,
		ParentArtifact:     j.ParentArtifact,
		ParentArtifactText: j.ParentArtifactText,
		Validate:           j.Settings.Validate,
		Conflicts:          j.Refresh.Conflicts,
		ConflictsFrom:      j.Refresh.From,
	}
	if f, ok := artifact.FormatOf(l.Type); ok {
		d.Format = f
		d.ChildType = strings.ToLower(f.Child)
	}
	if d.ParentArtifactText == "" && d.ParentArtifact != "" {
		b, err := readParentArtifact(j.Home, d.ParentArtifact)
		if err != nil {
			return d, err
		}
		d.ParentArtifactText = string(b)
	}
	return d, nil
}

// MaxPromptTemplate bounds a prompt template file.
const MaxPromptTemplate = 1 << 20

// readParentArtifact reads the parent's artifact for a child's prompt: the
// copy loopr kept when the parent passed, under home, reached without a
// symlink and read only if it is a regular file of at most
// artifact.MaxSize bytes.
func readParentArtifact(home, path string) ([]byte, error) {
	b, err := safefile.ReadIn(home, path, artifact.MaxSize)
	if err != nil {
		return nil, fileReason("parent artifact", path, "loopr keeps it under the parent's loops/<id>/accepted/; reset the parent to write it again", err)
	}
	return b, nil
}

// fenced wraps text in a code fence longer than any run of backticks in it,
// so untrusted text cannot end the block early.
func fenced(text string) string {
	longest, run := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return fence + "\n" + strings.TrimRight(text, "\n") + "\n" + fence
}
