package changes

import (
	"fmt"
	"os"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/loopr-dev/loopr/api"
)

// Parse turns a patch as `git diff` prints it (a/ and b/ prefixes, no
// colour) into files, hunks and lines, with each file's and the total
// added and removed line counts. Files, hunks and lines are never nil.
func Parse(patch string) (files []api.DiffFile, added, removed int, err error) {
	parsed, _, err := gitdiff.Parse(strings.NewReader(patch))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("parse the patch: %w", err)
	}
	files = make([]api.DiffFile, 0, len(parsed))
	for _, f := range parsed {
		df := file(f)
		added += df.Added
		removed += df.Removed
		files = append(files, df)
	}
	return files, added, removed, nil
}

// file converts one parsed file.
func file(f *gitdiff.File) api.DiffFile {
	df := api.DiffFile{Path: f.NewName, Status: status(f), Binary: f.IsBinary, Hunks: []api.DiffHunk{}}
	switch {
	case f.IsDelete:
		df.Path = f.OldName
		df.OldMode = mode(f.OldMode)
	case f.IsNew:
		df.NewMode = mode(f.NewMode)
	case f.IsRename || f.IsCopy:
		df.OldPath = f.OldName
	}
	if !f.IsNew && !f.IsDelete && f.OldMode != 0 && f.NewMode != 0 && f.OldMode != f.NewMode {
		df.OldMode, df.NewMode = mode(f.OldMode), mode(f.NewMode)
	}
	for _, frag := range f.TextFragments {
		h := hunk(frag)
		df.Added += int(frag.LinesAdded)
		df.Removed += int(frag.LinesDeleted)
		df.Hunks = append(df.Hunks, h)
	}
	return df
}

// status says what happened to f (api.DiffAdded, …).
func status(f *gitdiff.File) string {
	switch {
	case f.IsNew:
		return api.DiffAdded
	case f.IsDelete:
		return api.DiffDeleted
	case f.IsRename:
		return api.DiffRenamed
	case f.IsCopy:
		return api.DiffCopied
	case len(f.TextFragments) == 0 && !f.IsBinary && f.OldMode != f.NewMode:
		return api.DiffMode
	}
	return api.DiffModified
}

// mode is a file mode as git writes it ("100644"); "" for none.
func mode(m os.FileMode) string {
	if m == 0 {
		return ""
	}
	return fmt.Sprintf("%06o", uint32(m))
}

// hunk converts one text fragment, numbering its lines on each side.
func hunk(frag *gitdiff.TextFragment) api.DiffHunk {
	h := api.DiffHunk{
		OldStart: int(frag.OldPosition), OldLines: int(frag.OldLines),
		NewStart: int(frag.NewPosition), NewLines: int(frag.NewLines),
		Lines: make([]api.DiffLine, 0, len(frag.Lines)),
	}
	h.Header = "@@ -" + span(h.OldStart, h.OldLines) + " +" + span(h.NewStart, h.NewLines) + " @@"
	if frag.Comment != "" {
		h.Header += " " + frag.Comment
	}
	oldLine, newLine := h.OldStart, h.NewStart
	for _, l := range frag.Lines {
		text, eol := strings.CutSuffix(l.Line, "\n")
		dl := api.DiffLine{Text: text, NoEOL: !eol}
		switch l.Op {
		case gitdiff.OpAdd:
			dl.Kind, dl.NewLine = api.DiffAdd, newLine
			newLine++
		case gitdiff.OpDelete:
			dl.Kind, dl.OldLine = api.DiffDel, oldLine
			oldLine++
		default:
			dl.Kind, dl.OldLine, dl.NewLine = api.DiffContext, oldLine, newLine
			oldLine++
			newLine++
		}
		h.Lines = append(h.Lines, dl)
	}
	return h
}

// span is one side of a hunk header as git writes it: "start" for one
// line, else "start,count".
func span(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
