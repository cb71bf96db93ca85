package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) statusCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Daemon, counts by status, usage against caps, rate-limit state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withReader(func(b Backend) error {
				st, err := b.Status(cmd.Context())
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, st)
				}
				if err := printStatus(e.stdout, st, e.now()); err != nil {
					return err
				}
				if st.Cluster != nil {
					printWorkers(e, st.Cluster)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print status as JSON")
	return c
}

// printStatus prints st for a person, in lines that fit 80 columns where
// the values allow: the loops that need you first, then one aligned table.
func printStatus(out io.Writer, st api.Status, now time.Time) error {
	if st.Counts[loop.NeedsHuman]+st.Counts[loop.AwaitingApproval]+st.Counts[loop.AwaitingReview] > 0 || st.Trust != nil {
		printNeedsYou(out, st, now)
	}
	if len(st.ReadyToLand) > 0 {
		printReadyToLand(out, st.ReadyToLand, now)
	}
	w := table(out)
	if st.Daemon {
		fmt.Fprintf(w, "daemon\trunning, pid %d, version %s, up %s\n", st.PID, st.Version, age(time.Duration(st.UptimeSecs)*time.Second))
	} else {
		fmt.Fprintf(w, "daemon\tnot running\n")
	}
	fmt.Fprintf(w, "home\t%s\n", st.Home)
	if st.Store != "" {
		fmt.Fprintf(w, "store\t%s\n", st.Store)
	}
	// The counts: the loops still in play, then the finished ones (one
	// line of ten statuses ran past 130 columns), each wrapped at 80.
	var live, done []string
	for _, s := range loop.Statuses {
		if (s == loop.Merging || s == loop.AwaitingReview) && st.Counts[s] == 0 {
			continue // passes waiting in the merge queue or for review: said when there are some
		}
		c := fmt.Sprintf("%s %d", s, st.Counts[s])
		if s.Terminal() {
			done = append(done, c)
		} else {
			live = append(live, c)
		}
	}
	label := "loops"
	for _, l := range append(wrapList(live, countsWidth), wrapList(done, countsWidth)...) {
		fmt.Fprintf(w, "%s\t%s\n", label, l)
		label = ""
	}
	usage := []string{fmt.Sprintf("total %d/%d", st.Running, st.MaxLoops)}
	for _, t := range st.Types {
		cp := "-"
		if t.Cap > 0 {
			cp = fmt.Sprint(t.Cap)
		}
		usage = append(usage, fmt.Sprintf("%s %d/%s", t.Type, t.Running, cp))
	}
	fmt.Fprintf(w, "running\t%s\n", strings.Join(usage, ", "))
	limited := 0
	for _, p := range st.Profiles {
		switch {
		case p.Limited:
			fmt.Fprintf(w, "rate limit\tagent %s: backing off after %d hit(s); its loops resume at %s (in %s)\n",
				p.Agent, p.Hits, p.ResumeAt.Local().Format("2006-01-02 15:04:05"), age(p.ResumeAt.Sub(now).Round(time.Second)))
			limited++
		case p.Recovering:
			fmt.Fprintf(w, "rate limit\tagent %s: recovering, one start per poll\n", p.Agent)
			limited++
		}
	}
	if limited == 0 {
		fmt.Fprintf(w, "rate limit\tnone\n")
	}
	if len(st.Spent) > 0 {
		fmt.Fprintf(w, "budget\t%d tree(s) spent their budget: `loopr budget ROOT --usd N` raises it\n", len(st.Spent))
	}
	fmt.Fprintf(w, "spent today\t%s\n", usageText(st.SpentToday))
	disk := fmt.Sprintf("%.1f GB free", st.DiskFreeGB)
	switch {
	case st.DiskFull:
		disk += " — full: no loop starts and new loops are refused until space returns"
	case st.DiskLow:
		disk += " — below storage.disk_quota_min_gb: no new loops start"
	}
	fmt.Fprintf(w, "disk\t%s\n", disk)
	if st.NoGit != "" {
		fmt.Fprintf(w, "no git\t%s\n", st.NoGit)
	}
	if st.Containment != "" {
		fmt.Fprintf(w, "containment\t%s\n", st.Containment)
	}
	printSandbox(w, st.Sandbox)
	if st.Warning != "" {
		fmt.Fprintf(w, "note\t%s\n", st.Warning)
	}
	if err := w.Flush(); err != nil || len(st.Problems) == 0 {
		return err
	}
	// Each problem on its line, what to do under it (as the loops that
	// need you): three columns side by side ran past 150.
	fmt.Fprintf(out, "\nproblems: loops of these types do not start (reason preflight) until fixed\n")
	w = table(out)
	for _, p := range st.Problems {
		fmt.Fprintf(w, "  %s\t%s\n", p.TypesText, p.What)
		fmt.Fprintf(w, "  \t→ %s\n", p.Fix)
	}
	return w.Flush()
}

// printNeedsYou lists the loops that need a person, first in `loopr
// status`: the loops in needs_human and the plans awaiting approval,
// longest waiting first, each on one line (short id, reason, since when,
// and the title last, so wide characters in it shift nothing), what it
// waits for under it, and the commands that resume it, so that a line
// fits 80 columns.
func printNeedsYou(out io.Writer, st api.Status, now time.Time) {
	type row struct {
		id, reason, ago, title, detail string
		since                          time.Time
		lines, actions                 []string
	}
	var rows []row
	total := st.Counts[loop.NeedsHuman] + st.Counts[loop.AwaitingApproval] + st.Counts[loop.AwaitingReview]
	if t := st.Trust; t != nil {
		// loopr.yml's commands wait for `loopr trust`: the configuration's
		// row, not a loop's, naming the commands.
		r := row{id: "loopr.yml", reason: "untrusted", title: "not trusted here: none of its commands runs", since: t.Since,
			detail: "it runs:", actions: []string{t.Action}}
		if t.Held {
			r.reason, r.title, r.detail = "trust", "reload held: the last trusted configuration runs", "changed:"
		}
		r.lines = trustLines(t.Commands)
		rows = append(rows, r)
		total++
	}
	for _, n := range st.NeedsYou {
		rows = append(rows, row{id: loop.ShortID(n.ID), reason: string(n.Reason), title: n.Title, detail: loop.ShortIDs(n.Detail), since: n.Since,
			actions: []string{loop.ShortIDs(n.Action)}})
	}
	for _, a := range st.AwaitingApproval {
		ref := loop.ShortID(a.ID)
		rows = append(rows, row{id: ref, reason: "approval", title: a.Title, since: a.Since,
			detail: "the plan passed: read it with loopr show " + ref + " --artifact, then one of", actions: api.ApprovalActions(ref)})
	}
	for _, a := range st.AwaitingReview {
		ref := loop.ShortID(a.ID)
		rows = append(rows, row{id: ref, reason: "review", title: a.Title, since: a.Since,
			detail: "the task passed: read its diff with loopr diff " + ref + ", then one of", actions: api.ReviewActions(ref)[1:]})
	}
	slices.SortStableFunc(rows, func(a, b row) int { return a.since.Compare(b.since) })
	fmt.Fprintf(out, "NEEDS YOU (%d)\n", total)
	var wid, wreason, wago int
	for i := range rows {
		rows[i].ago = age(now.Sub(rows[i].since).Round(time.Second)) + " ago"
		wid = max(wid, utf8.RuneCountInString(rows[i].id))
		wreason = max(wreason, utf8.RuneCountInString(rows[i].reason))
		wago = max(wago, utf8.RuneCountInString(rows[i].ago))
	}
	titleW := max(needsLineWidth-(2+wid+2+wreason+2+wago+2), 20)
	for _, r := range rows {
		fmt.Fprintf(out, "  %s  %s  %s  %s\n", pad(r.id, wid), pad(r.reason, wreason), pad(r.ago, wago), oneLine(r.title, titleW))
		if r.detail != "" {
			fmt.Fprintf(out, "    %s\n", oneLine(r.detail, needsLineWidth-4))
		}
		for _, l := range r.lines {
			fmt.Fprintf(out, "      %s\n", oneLine(l, needsLineWidth-6))
		}
		for _, a := range r.actions {
			fmt.Fprintf(out, "    → %s\n", a)
		}
	}
	if more := st.Counts[loop.NeedsHuman] - len(st.NeedsYou); more > 0 {
		fmt.Fprintf(out, "  … and %d more: loopr list --status needs_human\n", more)
	}
	if more := st.Counts[loop.AwaitingApproval] - len(st.AwaitingApproval); more > 0 {
		fmt.Fprintf(out, "  … and %d more: loopr list --status awaiting_approval\n", more)
	}
	if more := st.Counts[loop.AwaitingReview] - len(st.AwaitingReview); more > 0 {
		fmt.Fprintf(out, "  … and %d more: loopr list --status awaiting_review\n", more)
	}
	fmt.Fprintln(out)
}

// printReadyToLand lists the plans whose tree is done and not landed:
// each on one line (short id, how long ago, the title last, clipped),
// its branch and base branch under it (a branch name is never clipped),
// and the command that lands it, so that a line fits 80 columns.
func printReadyToLand(out io.Writer, ready []api.LandReady, now time.Time) {
	fmt.Fprintf(out, "READY TO LAND (%d)\n", len(ready))
	var wid, wago int
	ago := make([]string, len(ready))
	for i, r := range ready {
		ago[i] = age(now.Sub(r.Since).Round(time.Second)) + " ago"
		wid = max(wid, utf8.RuneCountInString(loop.ShortID(r.ID)))
		wago = max(wago, utf8.RuneCountInString(ago[i]))
	}
	titleW := max(needsLineWidth-(2+wid+2+wago+2), 20)
	for i, r := range ready {
		id := loop.ShortID(r.ID)
		fmt.Fprintf(out, "  %s  %s  %s\n", pad(id, wid), pad(ago[i], wago), oneLine(r.Title, titleW))
		branch, into := r.Branch, ""
		if r.Into != "" {
			branch += " → " + r.Into
		} else {
			branch += " (started on a detached HEAD)"
			into = " --into BRANCH"
		}
		fmt.Fprintf(out, "    %s\n", branch)
		fmt.Fprintf(out, "    → loopr land %s%s   (--dry-run says what it would do)\n", id, into)
	}
	fmt.Fprintln(out)
}

// needsLineWidth is the width NEEDS YOU lines keep to.
const needsLineWidth = 80

// pad is s followed by spaces to n runes.
func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// countsWidth is the room the counts have at 80 columns, right of the
// widest label ("spent today" and two spaces).
const countsWidth = 80 - 13

// wrapList joins items with ", " into lines of at most width columns (an
// item longer than that on a line of its own).
func wrapList(items []string, width int) []string {
	var lines []string
	var cur string
	for i, it := range items {
		if i < len(items)-1 {
			it += ","
		}
		switch {
		case cur == "":
			cur = it
		case len(cur)+1+len(it) <= width:
			cur += " " + it
		default:
			lines = append(lines, cur)
			cur = it
		}
	}
	return append(lines, cur)
}

// maxTrustLines is how many commands the untrusted row of NEEDS YOU names.
const maxTrustLines = 8

// trustLines clips the commands NEEDS YOU names to maxTrustLines.
func trustLines(cmds []string) []string {
	if len(cmds) <= maxTrustLines {
		return cmds
	}
	return append(slices.Clone(cmds[:maxTrustLines-1]), fmt.Sprintf("… and %d more: loopr trust lists them all", len(cmds)-maxTrustLines+1))
}

// printSandbox prints where each profile's agents run: one line when
// there is only the default profile, else one a profile.
func printSandbox(w io.Writer, sb []api.ProfileSandbox) {
	label := "sandbox"
	for _, p := range sb {
		if len(sb) == 1 {
			fmt.Fprintf(w, "%s\t%s\n", label, p.Text)
			return
		}
		fmt.Fprintf(w, "%s\tagent %s: %s\n", label, p.Profile, p.Text)
		label = ""
	}
}
