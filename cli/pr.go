package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// `loopr pr`: push a plan's branch and open or update its pull request
// through the gh CLI the user has and is logged into. It runs in the CLI,
// never the daemon: gh's login and git's credentials are the user's.

func (e *env) prCmd() *cobra.Command {
	var (
		draft        bool
		base, remote string
	)
	c := &cobra.Command{
		Use:   "pr PLAN [--draft] [--base BRANCH] [--remote NAME]",
		Short: "Push a plan's branch and open or update its pull request (with gh)",
		Long: `Push the plan's branch (loopr/<slug>-<short-id>) to git.remote (or --remote;
origin when neither is set) and open a pull request for it on GitHub into
its base branch (the branch the plan started from, or --base), through
the gh CLI, which must be installed and logged in (gh auth login).

The description holds the plan's title and summary, a table of its tree
(each loop, its status, iterations, the exit codes of its evidence, its
cost) and the total cost. Run again, it pushes again and updates the same
pull request (found by its branch), never opening a second one. It prints
the pull request's URL.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withReader(func(b Backend) error {
				return e.openPR(cmd.Context(), b, args[0], prOptions{draft: draft, base: base, remote: remote})
			})
		},
	}
	f := c.Flags()
	f.BoolVar(&draft, "draft", false, "open the pull request as a draft")
	f.StringVar(&base, "base", "", "the branch to merge into (default: the branch the plan started from)")
	f.StringVar(&remote, "remote", "", "the git remote to push to (default: git.remote, else origin)")
	return c
}

type prOptions struct {
	draft        bool
	base, remote string
}

// openPR is `loopr pr`.
func (e *env) openPR(ctx context.Context, b Backend, ref string, o prOptions) error {
	plan, err := lookup(ctx, b, ref)
	if err != nil {
		return err
	}
	if plan.Type != loop.Plan || plan.Parent != "" {
		return &UsageError{fmt.Errorf("%s is a %s; pr takes a plan (the root of a tree)", loop.ShortID(plan.ID), plan.Type)}
	}
	branch := plan.Branch
	if branch == "" {
		return &UsageError{fmt.Errorf("plan %s has no branch yet (%s): nothing to push", loop.ShortID(plan.ID), plan.Status)}
	}
	if o.base == "" {
		o.base = plan.Base.Branch
	}
	if o.base == "" {
		return &UsageError{errors.New("the plan started on a detached HEAD: give --base BRANCH")}
	}
	if o.remote == "" {
		o.remote = cmp.Or(e.cfg.Git.Remote, "origin")
	}
	raw, err := e.git(ctx, "config", "--get", "remote."+o.remote+".url")
	if err != nil {
		return &UsageError{fmt.Errorf("no git remote %q in %s: git remote add %s URL, or --remote NAME", o.remote, e.paths.Workspace, o.remote)}
	}
	repo, err := parseRemoteURL(strings.TrimSpace(raw))
	if err != nil {
		return &UsageError{fmt.Errorf("--remote %s: %w", o.remote, err)}
	}
	gh := ghCLI{host: repo.host}
	if err := gh.check(ctx); err != nil {
		return err
	}
	body, err := e.prDescription(ctx, b, plan)
	if err != nil {
		return err
	}
	if err := e.pushBranch(ctx, o.remote, branch); err != nil {
		return err
	}
	pr, created, err := gh.upsertPR(ctx, repo, branch, o.base, plan.Title, body, o.draft)
	if err != nil {
		return err
	}
	verb := "updated"
	if created {
		verb = "opened"
	}
	fmt.Fprintf(e.stdout, "%s pull request #%d: %s\n", verb, pr.Number, pr.HTMLURL)
	return nil
}

// pushBranch pushes the local branch to remote, unless the remote already
// holds it (with git.remote, the merge queue pushes the plan branch there
// and the local one may lag behind).
func (e *env) pushBranch(ctx context.Context, remote, branch string) error {
	tracking := "refs/remotes/" + remote + "/" + branch
	_, local := e.git(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if _, err := e.git(ctx, "fetch", "--quiet", remote, "+refs/heads/"+branch+":"+tracking); err == nil {
		if _, err := e.git(ctx, "merge-base", "--is-ancestor", "refs/heads/"+branch, tracking); err == nil || local != nil {
			fmt.Fprintf(e.stdout, "%s: %s already holds it\n", branch, remote)
			return nil
		}
	}
	if local != nil {
		return &UsageError{fmt.Errorf("the plan's branch %s is gone (deleted?) and %s does not hold it: nothing to push", branch, remote)}
	}
	fmt.Fprintf(e.stdout, "pushing %s to %s…\n", branch, remote)
	if out, err := e.git(ctx, "push", "--quiet", remote, "refs/heads/"+branch+":refs/heads/"+branch); err != nil {
		return fmt.Errorf("git push %s %s: %w%s", remote, branch, err, firstLineOf(out))
	}
	return nil
}

// prDescription is the pull request body of plan: its summary (from its
// artifact, else its task), its tree, the total cost.
func (e *env) prDescription(ctx context.Context, b Backend, plan loop.Loop) (string, error) {
	summary := ""
	if plan.Artifact != "" {
		if text, err := e.readArtifact(b, plan); err == nil {
			summary = planSummary(text)
		}
	}
	if summary == "" {
		summary = plan.Task
	}
	all, err := b.List(ctx, api.ListRequest{})
	if err != nil {
		return "", err
	}
	tree := subtree(all, plan.ID)
	tu, err := b.TreeUsage(ctx, plan.ID)
	if err != nil {
		return "", err
	}
	return prBody(plan, summary, tree, tu.Usage), nil
}

// subtree is root and its descendants among loops, in creation order.
func subtree(loops []loop.Loop, root string) []loop.Loop {
	in := map[string]bool{root: true}
	var out []loop.Loop
	for changed := true; changed; {
		changed = false
		for _, l := range loops {
			if !in[l.ID] && in[l.Parent] {
				in[l.ID], changed = true, true
			}
		}
	}
	for _, l := range loops {
		if in[l.ID] {
			out = append(out, l)
		}
	}
	return out
}

// git runs git in the workspace with the user's environment (its
// credential helpers and prompts); stdout, or the error with stderr.
func (e *env) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", e.paths.Workspace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}

// ghCLI runs the gh CLI against one GitHub host (GH_HOST: github.com or an
// Enterprise server).
type ghCLI struct{ host string }

// errNoGH and errGHLogin are what `loopr pr` says when gh is missing or
// not logged in.
var errNoGH = errors.New("gh, GitHub's CLI, is not installed: install it (https://cli.github.com, or apt install gh), run gh auth login, then loopr pr again")

// check says, in one line, what to do when gh is missing or not logged in
// to the host.
func (g ghCLI) check(ctx context.Context) error {
	if _, err := exec.LookPath("gh"); err != nil {
		return errNoGH
	}
	if _, err := g.run(ctx, nil, "auth", "status", "--hostname", g.host); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("gh is not logged in to %s: run gh auth login --hostname %s, then loopr pr again", g.host, g.host)
		}
		return fmt.Errorf("gh auth status: %w", err)
	}
	return nil
}

// run runs gh with args (stdin, when not nil, as its input) and returns its
// stdout.
func (g ghCLI) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "gh", args...)
	cmd.Env = append(os.Environ(), "GH_HOST="+g.host, "GH_PROMPT_DISABLED=1", "GH_NO_UPDATE_NOTIFIER=1", "NO_COLOR=1")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if errors.Is(err, exec.ErrNotFound) {
		return nil, errNoGH
	}
	if err != nil {
		return out, &ghError{args: args, err: err, stderr: strings.TrimSpace(stderr.String()), stdout: out}
	}
	return out, nil
}

// ghError is a gh command that failed: its first line of output says why.
type ghError struct {
	args   []string
	err    error
	stderr string
	stdout []byte
}

func (e *ghError) Error() string {
	why := firstLineOf(e.stderr)
	var apiErr struct{ Message string }
	if json.Unmarshal(e.stdout, &apiErr) == nil && apiErr.Message != "" {
		why = ": " + apiErr.Message
	}
	return fmt.Sprintf("gh %s: %v%s", strings.Join(e.args[:min(len(e.args), 4)], " "), e.err, why)
}

func (e *ghError) Unwrap() error { return e.err }

// ghPR is what `loopr pr` reads of a pull request.
type ghPR struct {
	Number  int    `json:"number"`
	HTMLURL string `json:"html_url"`
}

// upsertPR finds the open pull request of owner:branch (GET
// /repos/{owner}/{repo}/pulls?head=…&state=open) and updates it (PATCH),
// or opens one (POST); created says which.
func (g ghCLI) upsertPR(ctx context.Context, r ghRepo, branch, base, title, body string, draft bool) (ghPR, bool, error) {
	pulls := fmt.Sprintf("repos/%s/%s/pulls", r.owner, r.name)
	out, err := g.run(ctx, nil, "api", "-H", "Accept: application/vnd.github+json",
		pulls+"?head="+r.owner+":"+branch+"&state=open")
	if err != nil {
		return ghPR{}, false, err
	}
	var open []ghPR
	if err := json.Unmarshal(out, &open); err != nil {
		return ghPR{}, false, fmt.Errorf("gh api %s: %w", pulls, err)
	}
	var pr ghPR
	if len(open) > 0 {
		in, _ := json.Marshal(map[string]string{"title": title, "body": body, "base": base})
		out, err = g.run(ctx, in, "api", "-X", "PATCH", "-H", "Accept: application/vnd.github+json", fmt.Sprintf("%s/%d", pulls, open[0].Number), "--input", "-")
	} else {
		in, _ := json.Marshal(map[string]any{"title": title, "body": body, "head": branch, "base": base, "draft": draft})
		out, err = g.run(ctx, in, "api", "-X", "POST", "-H", "Accept: application/vnd.github+json", pulls, "--input", "-")
	}
	if err != nil {
		return ghPR{}, false, err
	}
	if err := json.Unmarshal(out, &pr); err != nil {
		return ghPR{}, false, fmt.Errorf("gh api %s: %w", pulls, err)
	}
	return pr, len(open) == 0, nil
}

// firstLineOf is ": " and the first line of s, or "" for none.
func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return ""
	}
	return ": " + s
}
