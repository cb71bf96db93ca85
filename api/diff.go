package api

// Diff is `loopr diff ID --json` (GET /v1/loops/{id}/diff): what a loop's
// work changes, as git computes it (package changes says which commits
// are compared for each kind of loop). Files, hunks and lines are never
// null.
type Diff struct {
	Loop string `json:"loop"` // the loop's id
	// Kind says what is compared: DiffTask (a task's branch against the
	// plan branch it merges into), DiffMerged (a merged task: what it
	// brought into the plan branch) or DiffPlan (a plan or standalone
	// loop's branch against the commit it started from).
	Kind string  `json:"kind"`
	From DiffRef `json:"from"`
	To   DiffRef `json:"to"`
	// Command is the git command that prints the same diff in the
	// repository, e.g. "git diff 1a2b3c...4d5e6f".
	Command string     `json:"command"`
	Files   []DiffFile `json:"files"`
	Added   int        `json:"added"`   // lines added, over Files
	Removed int        `json:"removed"` // lines removed, over Files
	// Truncated says the patch was over the bound and was cut after Cut
	// patch lines, at a hunk or file boundary: hunks and files past the
	// cut are not listed, and counts are of what is listed.
	Truncated bool `json:"truncated,omitzero"`
	Cut       int  `json:"cut,omitzero"`
}

// What a Diff compares (Diff.Kind).
const (
	DiffTask   = "task"
	DiffMerged = "merged"
	DiffPlan   = "plan"
)

// DiffRef is one side of a diff: a branch (or "" when only a commit is
// known, or the branch is gone) and the commit compared.
type DiffRef struct {
	Branch string `json:"branch,omitzero"`
	Commit string `json:"commit"`
}

// DiffFile is one file's change. Path is the file's name after the change
// (before it, for a deleted file); OldPath is set for a rename or copy.
type DiffFile struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitzero"`
	// Status is one of the DiffStatus constants.
	Status  string     `json:"status"`
	Binary  bool       `json:"binary,omitzero"`
	OldMode string     `json:"old_mode,omitzero"` // octal, e.g. "100644", when the mode changed or the file is new/deleted
	NewMode string     `json:"new_mode,omitzero"`
	Added   int        `json:"added"`
	Removed int        `json:"removed"`
	Hunks   []DiffHunk `json:"hunks"`
}

// What happened to a file (DiffFile.Status).
const (
	DiffAdded    = "added"
	DiffDeleted  = "deleted"
	DiffModified = "modified"
	DiffRenamed  = "renamed"
	DiffCopied   = "copied"
	DiffMode     = "mode" // only the mode changed
)

// DiffHunk is one hunk: its "@@ -a,b +c,d @@ section" header and lines.
type DiffHunk struct {
	Header   string     `json:"header"`
	OldStart int        `json:"old_start"`
	OldLines int        `json:"old_lines"`
	NewStart int        `json:"new_start"`
	NewLines int        `json:"new_lines"`
	Lines    []DiffLine `json:"lines"`
}

// DiffLine is one line of a hunk. OldLine and NewLine are its line numbers
// on each side, 0 on the side it is not on. Text has no newline; NoEOL
// marks a last line without one ("\ No newline at end of file").
type DiffLine struct {
	Kind    string `json:"kind"` // DiffContext, DiffAdd or DiffDel
	OldLine int    `json:"old_line,omitzero"`
	NewLine int    `json:"new_line,omitzero"`
	Text    string `json:"text"`
	NoEOL   bool   `json:"no_eol,omitzero"`
}

// The kinds of a hunk's lines (DiffLine.Kind).
const (
	DiffContext = "context"
	DiffAdd     = "add"
	DiffDel     = "del"
)
