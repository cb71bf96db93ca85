package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
)

func (e *env) diffCmd() *cobra.Command {
	var jsonOut, stat, nameOnly bool
	c := &cobra.Command{
		Use:   "diff ID [--stat | --name-only | --json]",
		Short: "What a loop's work changes: a task against its plan branch, a plan against its base",
		Long: `Print what loop ID's work changes, as a unified diff computed by git:

  a task (a loop with its own branch under a plan): its branch against the
    plan branch it merges into, from where they diverged (git diff plan...task);
  a merged task (its branch may be gone): the commit that passed against the
    plan branch just before the merge that brought it in;
  a plan, or a loop with a branch and no plan: its branch against the commit
    it started from (its recorded base).

In colour on a terminal (not with NO_COLOR). A diff over 20000 lines is cut,
with a note naming the git command that prints it whole.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := btoi(jsonOut) + btoi(stat) + btoi(nameOnly); n > 1 {
				return &UsageError{fmt.Errorf("--json, --stat and --name-only go alone: pick one")}
			}
			return e.withReader(func(b Backend) error {
				id, err := resolveID(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				d, err := b.Diff(cmd.Context(), id)
				if err != nil {
					return err
				}
				color := terminalWidth(e.stdout) > 0 && e.getenv("NO_COLOR") == ""
				switch {
				case jsonOut:
					return writeJSON(e.stdout, d)
				case nameOnly:
					for _, f := range d.Files {
						fmt.Fprintln(e.stdout, quoteName(f.Path))
					}
				case stat:
					printStat(e.stdout, d, terminalWidth(e.stdout), color)
				default:
					printPatch(e.stdout, d, color, terminalWidth(e.stdout) > 0)
					if len(d.Files) == 0 {
						fmt.Fprintf(e.stderr, "no changes (%s)\n", d.Command)
					}
				}
				if d.Truncated {
					fmt.Fprintf(e.stderr, "loopr: diff cut at %d lines; see %s\n", d.Cut, d.Command)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print files, hunks and lines as JSON")
	c.Flags().BoolVar(&stat, "stat", false, "print a diffstat: each file's added and removed lines, aligned")
	c.Flags().BoolVar(&nameOnly, "name-only", false, "print only the changed files' names")
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Colours of a diff (SGR parameters).
const (
	sgrMeta = "1"  // file headers: bold
	sgrHunk = "36" // @@ lines: cyan
	sgrAdd  = "32" // green
	sgrDel  = "31" // red
)

// paint wraps s in an SGR sequence when color is on.
func paint(s, sgr string, color bool) string {
	if !color || s == "" {
		return s
	}
	return "\x1b[" + sgr + "m" + s + "\x1b[m"
}

// printPatch prints d as git would (a patch `git apply` takes when it is
// not cut): file headers, hunks and lines. On a terminal (tty), the text
// of lines is escaped (termsafe) and coloured with color.
func printPatch(w io.Writer, d api.Diff, color, tty bool) {
	for _, f := range d.Files {
		for _, h := range fileHeader(f) {
			fmt.Fprintln(w, paint(h, sgrMeta, color))
		}
		for _, h := range f.Hunks {
			fmt.Fprintln(w, paint(h.Header, sgrHunk, color))
			for _, l := range h.Lines {
				text := l.Text
				if tty {
					text = termsafe.Text(text)
				}
				switch l.Kind {
				case api.DiffAdd:
					fmt.Fprintln(w, paint("+"+text, sgrAdd, color))
				case api.DiffDel:
					fmt.Fprintln(w, paint("-"+text, sgrDel, color))
				default:
					fmt.Fprintln(w, " "+text)
				}
				if l.NoEOL {
					fmt.Fprintln(w, `\ No newline at end of file`)
				}
			}
		}
	}
}

// fileHeader is the git header of one file's patch.
func fileHeader(f api.DiffFile) []string {
	oldPath := f.Path
	if f.OldPath != "" {
		oldPath = f.OldPath
	}
	a, b := quoteName("a/"+oldPath), quoteName("b/"+f.Path)
	out := []string{"diff --git " + a + " " + b}
	switch f.Status {
	case api.DiffAdded:
		out = append(out, "new file mode "+f.NewMode)
	case api.DiffDeleted:
		out = append(out, "deleted file mode "+f.OldMode)
	case api.DiffRenamed, api.DiffCopied:
		verb := "rename"
		if f.Status == api.DiffCopied {
			verb = "copy"
		}
		out = append(out, verb+" from "+quoteName(oldPath), verb+" to "+quoteName(f.Path))
	}
	if f.OldMode != "" && f.NewMode != "" {
		out = append(out, "old mode "+f.OldMode, "new mode "+f.NewMode)
	}
	if f.Binary {
		return append(out, "Binary files "+orNull(a, f.Status == api.DiffAdded)+" and "+orNull(b, f.Status == api.DiffDeleted)+" differ")
	}
	if len(f.Hunks) > 0 {
		out = append(out, "--- "+orNull(a, f.Status == api.DiffAdded), "+++ "+orNull(b, f.Status == api.DiffDeleted))
	}
	return out
}

func orNull(name string, null bool) string {
	if null {
		return "/dev/null"
	}
	return name
}

// quoteName writes a file name the way git does with core.quotePath off:
// as it is, unless it has a control character, a quote, a backslash or
// bytes that are not UTF-8 — then in double quotes with C escapes (octal
// for raw bytes), which git apply reads back and a terminal prints
// harmlessly.
func quoteName(name string) string {
	if termsafe.Line(name) == name && !strings.ContainsAny(name, `"\`) {
		return name
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		c := name[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError && size == 1, termsafe.Line(name[i:i+size]) != name[i:i+size]:
			for _, x := range []byte(name[i : i+size]) {
				fmt.Fprintf(&b, `\%03o`, x)
			}
		default:
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// printStat prints a diffstat as git does: each file's name, its count of
// changed lines and a bar of +/- scaled to fit width (80 when not a
// terminal), aligned; then the totals.
func printStat(w io.Writer, d api.Diff, width int, color bool) {
	if width <= 0 {
		width = 80
	}
	names := make([]string, len(d.Files))
	nameW, maxChanged, countW := 0, 0, 1
	for i, f := range d.Files {
		names[i] = quoteName(f.Path)
		if f.OldPath != "" {
			names[i] = quoteName(f.OldPath) + " => " + names[i]
		}
		nameW = max(nameW, ansi.StringWidth(names[i]))
		maxChanged = max(maxChanged, f.Added+f.Removed)
		countW = max(countW, len(strconv.Itoa(f.Added+f.Removed)))
	}
	// " name | count bar" in width-1 columns: what is left for the bar,
	// at least 10.
	nameW = min(nameW, max(20, width-countW-17))
	barW := max(10, width-nameW-countW-7)
	for i, f := range d.Files {
		name := names[i]
		if ansi.StringWidth(name) > nameW {
			name = "..." + ansi.TruncateLeft(name, ansi.StringWidth(name)-nameW+3, "")
		}
		pad := strings.Repeat(" ", nameW-ansi.StringWidth(name))
		if f.Binary {
			fmt.Fprintf(w, " %s%s | %*s\n", name, pad, countW, "Bin")
			continue
		}
		add, del := f.Added, f.Removed
		if maxChanged > barW { // scale, keeping at least one mark for a change
			add, del = scaled(f.Added, maxChanged, barW), scaled(f.Removed, maxChanged, barW)
		}
		bar := paint(strings.Repeat("+", add), sgrAdd, color) + paint(strings.Repeat("-", del), sgrDel, color)
		fmt.Fprintf(w, " %s%s | %*d %s\n", name, pad, countW, f.Added+f.Removed, bar)
	}
	fmt.Fprintln(w, statSummary(d))
}

// scaled is n of total in width columns, at least 1 when n > 0.
func scaled(n, total, width int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*width/total)
}

// statSummary is git's last line of a diffstat.
func statSummary(d api.Diff) string {
	s := fmt.Sprintf(" %d %s changed", len(d.Files), plural(len(d.Files), "file"))
	if d.Added > 0 || d.Removed == 0 {
		s += fmt.Sprintf(", %d %s(+)", d.Added, plural(d.Added, "insertion"))
	}
	if d.Removed > 0 || d.Added == 0 {
		s += fmt.Sprintf(", %d %s(-)", d.Removed, plural(d.Removed, "deletion"))
	}
	return s
}
