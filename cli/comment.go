package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) commentCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   `comment ID PATH:LINE "TEXT"`,
		Short: "Comment on a line of a loop's work: the loop that wrote it gets another iteration with your comment",
		Long: `Comment on line LINE of file PATH (relative to the repository's root).

On a task (a loop with its own branch), the comment goes to that task: the
line is read on its branch (on its plan branch once it merged). On a plan
(or a spec or phase of one), the line is read on the plan branch, and the
comment goes to the loop whose commit last changed it (git blame, and the
Loopr-Loop trailer on loopr's commits); a line no loop of the tree wrote is
refused, naming the commit.

The comment re-opens that loop: a complete, merging, failed or reviewed
loop goes back to pending for one more iteration (a complete one's branch
is made again from the plan branch, and its tree is no longer done); a
pending, paused or running loop keeps going and takes the comment with its
next iteration. The prompt carries file:line, your text and the lines
around it. loopr comments ID lists comments and their state.

ID is a loop id, a unique prefix of one, or its short id.`,
		Args:              cobra.ExactArgs(3),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseLineRef(args[1])
			if err != nil {
				return err
			}
			req.Text = args[2]
			return e.withBackend(func(b Backend) error {
				ctx := cmd.Context()
				id, err := resolveID(ctx, b, args[0])
				if err != nil {
					return err
				}
				c, err := b.Comment(ctx, id, req)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, c)
				}
				to := fmt.Sprintf("%s %s %q", c.Type, loop.ShortID(c.Loop), oneLine(c.Title, 50))
				if c.On != "" {
					to += fmt.Sprintf(" (it wrote that line, at %.12s)", c.Commit)
				}
				fmt.Fprintf(e.stdout, "comment %d on %s:%d sent to %s: now %s\n", c.Seq, c.Path, c.Line, to, c.Status)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the comment as JSON")
	return c
}

// parseLineRef reads PATH:LINE.
func parseLineRef(s string) (api.CommentRequest, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return api.CommentRequest{}, &UsageError{fmt.Errorf("PATH:LINE: %q: want a file and a line number, e.g. cmd/main.go:42", s)}
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 {
		return api.CommentRequest{}, &UsageError{fmt.Errorf("PATH:LINE: %q: the line must be a number from 1, e.g. cmd/main.go:42", s)}
	}
	for strings.HasPrefix(s[:i], "./") { // tab completion at the root: the same path
		s, i = s[2:], i-2
	}
	return api.CommentRequest{Path: s[:i], Line: n}, nil
}

func (e *env) commentsCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "comments ID",
		Short: "List the line comments of a loop and the loops below it, with their state",
		Long: `List the line comments of a loop and of every loop below it (a plan's
whole tree), oldest first: the loop each reached, file:line, the state —
sent (waiting for that loop's next iteration) or answered by iteration N
(that iteration's pass or fail) — and the text.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withReader(func(b Backend) error {
				id, err := resolveID(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				cs, err := b.Comments(cmd.Context(), id)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, cs)
				}
				if len(cs) == 0 {
					fmt.Fprintf(e.stdout, "no comments on %s or below it\n", loop.ShortID(id))
					return nil
				}
				return printComments(e.stdout, cs, terminalWidth(e.stdout))
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the comments as JSON")
	return c
}

// printComments prints comments as a table whose text is cut to fit width
// columns on a terminal (0: not one, 60 runes); when the other columns
// leave it fewer than 20, each text goes on the line under its row.
func printComments(out io.Writer, cs []api.Comment, width int) error {
	rows := [][]string{{"LOOP", "TYPE", "#", "WHERE", "STATE"}}
	for _, c := range cs {
		rows = append(rows, []string{loop.ShortID(c.Loop), c.Type, fmt.Sprint(c.Seq), fmt.Sprintf("%s:%d", c.Path, c.Line), c.State})
	}
	textW := lastColumn(rows, width, 60)
	if width > 0 && textW <= 20 {
		var b strings.Builder
		for i, r := range alignRows(rows) {
			b.WriteString(r + "\n")
			if i > 0 {
				fmt.Fprintf(&b, "    %s\n", oneLine(cs[i-1].Text, max(width-4, 20)))
			}
		}
		_, err := io.WriteString(out, b.String())
		return err
	}
	w := table(out)
	for i, r := range rows {
		text := "TEXT"
		if i > 0 {
			text = oneLine(cs[i-1].Text, textW)
		}
		fmt.Fprintf(w, "%s\t%s\n", strings.Join(r, "\t"), text)
	}
	return w.Flush()
}

// alignRows pads rows' cells to their column's width, two spaces apart, as
// table does, for a table with lines of other text between its rows.
func alignRows(rows [][]string) []string {
	var wid []int
	for _, r := range rows {
		for c, cell := range r {
			if c == len(wid) {
				wid = append(wid, 0)
			}
			wid[c] = max(wid[c], utf8.RuneCountInString(cell))
		}
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		var b strings.Builder
		for c, cell := range r {
			b.WriteString(cell)
			if c < len(r)-1 {
				b.WriteString(strings.Repeat(" ", wid[c]-utf8.RuneCountInString(cell)+2))
			}
		}
		out[i] = b.String()
	}
	return out
}
