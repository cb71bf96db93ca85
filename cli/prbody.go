package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// The pull request of `loopr pr`: where the remote is on GitHub, and the
// description — the plan's title and summary, a table of its tree, the
// total cost.

// ghRepo is a GitHub repository: its host (github.com or an Enterprise
// server, with a port when the URL has one), owner and name.
type ghRepo struct{ host, owner, name string }

// parseRemoteURL reads a remote URL of the forms git and GitHub use:
// https://host/owner/repo(.git), ssh://git@host[:port]/owner/repo(.git) and
// git@host:owner/repo(.git).
func parseRemoteURL(raw string) (ghRepo, error) {
	bad := fmt.Errorf("remote URL %q: not a GitHub repository URL (https://HOST/OWNER/REPO, ssh://git@HOST/OWNER/REPO or git@HOST:OWNER/REPO)", raw)
	var host, path string
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
		if u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git" {
			return ghRepo{}, bad
		}
		host, path = u.Host, u.Path
		if u.Scheme == "ssh" || u.Scheme == "git" {
			host = u.Hostname() // an ssh port is not the API's
		}
	} else if at, rest, ok := strings.Cut(raw, "@"); ok && !strings.Contains(at, "/") {
		h, p, ok := strings.Cut(rest, ":")
		if !ok {
			return ghRepo{}, bad
		}
		host, path = h, p
	} else {
		return ghRepo{}, bad
	}
	parts := strings.Split(strings.Trim(strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git"), "/"), "/")
	if host == "" || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return ghRepo{}, bad
	}
	return ghRepo{host: host, owner: parts[0], name: parts[1]}, nil
}

// MaxPRBody is GitHub's limit on a pull request's body, in characters.
const MaxPRBody = 65536

// prBody is the description of a plan's pull request: its title and
// summary, a table of its tree (each loop: id, type, title, status,
// iterations, the exit codes of its evidence, its own cost) and the tree's
// total cost, under MaxPRBody (the table cut, with a note).
func prBody(plan loop.Loop, summary string, tree []loop.Loop, total loop.Usage) string {
	var head strings.Builder
	fmt.Fprintf(&head, "## %s\n\n", mdLine(plan.Title))
	if s := strings.TrimSpace(summary); s != "" {
		head.WriteString(clipRunes(s, 8000) + "\n\n")
	}
	head.WriteString("### The tree\n\n| id | type | title | status | iterations | evidence (exit codes) | cost |\n|---|---|---|---|---|---|---|\n")
	foot := fmt.Sprintf("\n**Total cost:** $%.2f over %d loops (%s tokens)\n\n<sub>Made by loopr: `loopr pr %s` updates this description.</sub>\n",
		total.CostUSD, len(tree), tokens(total.Tokens()), loop.ShortID(plan.ID))
	var rows strings.Builder
	const margin = 200 // the cut note
	for i, l := range tree {
		row := fmt.Sprintf("| %s | %s | %s | %s | %d/%d | %s | %s |\n", loop.ShortID(l.ID), l.Type, mdLine(clipRunes(l.Title, 80)),
			l.Status, l.Iteration, l.MaxIterations, evidenceCodes(l.Evidence), costText(l.Usage))
		if head.Len()+rows.Len()+len(row)+len(foot)+margin > MaxPRBody {
			fmt.Fprintf(&rows, "\n_The table is cut here: %d more loops (GitHub takes at most %d characters); `loopr list --parent %s` lists them all._\n",
				len(tree)-i, MaxPRBody, loop.ShortID(plan.ID))
			break
		}
		rows.WriteString(row)
	}
	return head.String() + rows.String() + foot
}

// evidenceCodes lists the exit codes of a loop's evidence, "-" for none:
// "0 0 · merge 0".
func evidenceCodes(ev []loop.Evidence) string {
	var own, merge []string
	for _, e := range ev {
		if e.Where == loop.WhereMerge {
			merge = append(merge, fmt.Sprint(e.ExitCode))
		} else {
			own = append(own, fmt.Sprint(e.ExitCode))
		}
	}
	s := strings.Join(own, " ")
	if len(merge) > 0 {
		s = strings.TrimSpace(s + " · merge " + strings.Join(merge, " "))
	}
	if s == "" {
		return "-"
	}
	return s
}

// mdLine is s on one line, safe in a markdown table cell.
func mdLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// clipRunes cuts s to at most n runes, with "…" when it cut.
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// planSummary is the summary of a plan artifact: what stands between its
// `# ` title line and its first `## ` section; "" when nothing does.
func planSummary(artifact string) string {
	var out []string
	for i, line := range strings.Split(artifact, "\n") {
		if i == 0 && strings.HasPrefix(line, "# ") {
			continue
		}
		if strings.HasPrefix(line, "## ") {
			break
		}
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
