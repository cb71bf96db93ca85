package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/hooks"
	"github.com/loopr-dev/loopr/preflight"
	"github.com/loopr-dev/loopr/trust"
	"github.com/loopr-dev/loopr/workspace"
)

func (e *env) initCmd() *cobra.Command {
	var force, full bool
	c := &cobra.Command{
		Use:   "init [--full]",
		Short: "Write a short commented loopr.yml (--full: every key and its default)",
		Long: `Write loopr.yml: the keys people change — the agent, the command that
validates a task, plan approval, the main cap, the budget, worktrees —
each at its default with a comment. --full writes every key instead, with
its default and a comment (docs/configuration.md lists them all).

When the workspace is a Go module (go.mod), a Rust crate (Cargo.toml), a
Node package (package.json) or a Python project (pyproject.toml,
setup.cfg, setup.py), ralph loops are validated by its test command —
go test ./..., cargo test, npm test, pytest; for a Python package under
src/ that is not installed, PYTHONPATH=src python3 -m pytest — and init
says what it found; otherwise the default (go test ./...) stays.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := e.configFlag
			if path == "" {
				path = filepath.Join(e.cwd, workspace.ConfigName)
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			f, err := os.OpenFile(path, flags, 0o644)
			if errors.Is(err, os.ErrExist) {
				return &UsageError{fmt.Errorf("%s already exists (use --force to overwrite)", path)}
			}
			if err != nil {
				return err
			}
			found := preflight.DetectAll(filepath.Dir(path))
			tmpl := config.ShortTemplate()
			if full {
				tmpl = config.Template()
			}
			body, err := templateFor(tmpl, found)
			if err != nil {
				f.Close()
				return err
			}
			if _, err := f.Write(body); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s\n", path)
			if err := e.trustWritten(path); err != nil {
				return err
			}
			if len(found) == 0 {
				fmt.Fprintf(e.stdout, "no go.mod, Cargo.toml, package.json, pyproject.toml, setup.cfg or setup.py here: ralph loops keep the default validate %q; set loops.ralph.validate to your test command\n", defaultValidate)
				return nil
			}
			var markers, cmds []string
			for _, d := range found {
				markers = append(markers, d.Marker)
				cmds = append(cmds, strconv.Quote(d.Validate))
			}
			fmt.Fprintf(e.stdout, "detected %s: ralph loops are validated by %s (loops.ralph.validate)\n",
				strings.Join(markers, ", "), strings.Join(cmds, ", "))
			for _, d := range found {
				if d.Note != "" {
					fmt.Fprintf(e.stdout, "  %s: %s\n", d.Validate, d.Note)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	c.Flags().BoolVar(&full, "full", false, "write every key with its default and a comment")
	return c
}

// trustWritten trusts the commands of the loopr.yml init wrote: the user
// asked for them. A file of only loopr's built-in commands needs no trust.
func (e *env) trustWritten(path string) error {
	c, err := config.Load(path)
	if err != nil {
		return fmt.Errorf("the loopr.yml just written: %w", err)
	}
	if trust.Builtin(c) {
		return nil
	}
	store, err := trust.DefaultStore(e.getenv)
	if err == nil {
		err = store.Add(trust.Fingerprint(c), path)
	}
	if err != nil {
		return fmt.Errorf("%w (run `loopr trust` once it is fixed)", err)
	}
	fmt.Fprintf(e.stdout, "trusted its commands on this machine (%s; `loopr trust` after you change them)\n", store.Path)
	return nil
}

// defaultValidate is the template's ralph validate command.
const defaultValidate = "go test ./..."

// templateFor returns template (config.Template() or ShortTemplate())
// with the ralph validate line set to the commands of the detected
// projects; the template itself when none was found or the only one is a
// Go module.
func templateFor(template []byte, found []preflight.Detection) ([]byte, error) {
	tmpl := string(template)
	if len(found) == 0 || len(found) == 1 && found[0].Validate == defaultValidate {
		return []byte(tmpl), nil
	}
	old := fmt.Sprintf("validate: [%q]", defaultValidate)
	ralph := strings.Index(tmpl, "\n  ralph:")
	i := strings.Index(tmpl[max(ralph, 0):], old)
	if ralph < 0 || i < 0 {
		return nil, fmt.Errorf("loopr's template has no ralph %s line", old)
	}
	i += ralph
	var cmds []string
	for _, d := range found {
		cmds = append(cmds, strconv.Quote(d.Validate))
	}
	repl := "validate: [" + strings.Join(cmds, ", ") + "]"
	// Keep the comment's column when the new value fits in front of it.
	end := i + len(old)
	for pad := 0; end < len(tmpl) && tmpl[end] == ' '; end++ {
		pad++
		if len(repl) < len(old)+pad-1 && tmpl[end+1] != ' ' {
			repl += strings.Repeat(" ", len(old)+pad-len(repl))
		}
	}
	if !strings.HasSuffix(repl, " ") {
		repl += " "
	}
	return []byte(tmpl[:i] + repl + tmpl[end:]), nil
}

func (e *env) configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	var jsonOut bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate loopr.yml and check what would fail every iteration here",
		Long: `Validate loopr.yml (errors name the line and key, exit 2), then check what
would make every iteration of a loop type fail in this workspace: an agent
binary that is not on PATH, a sandbox.runner bwrap that bubblewrap cannot
make here (missing, or no namespaces), a validate command whose program is missing, a
validate command that cannot work here (go test without a go.mod, npm test
without a package.json, cargo test without a Cargo.toml, pytest without a
Python project, make without a Makefile), and, with git worktrees, a
repository with no commit yet. With none it prints "PATH: ok"; otherwise
a table, one problem a line (the loop types, what is wrong, what to do),
and exits 1. The daemon runs
the same check and holds back loops of the affected types (reason
preflight) instead of spending their iterations.

It also exits 1 when loopr.yml's commands are not trusted on this machine,
listing them: the daemon runs none of them until ` + "`loopr trust`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			if err := e.checkHooks(cmd.Context()); err != nil {
				return err
			}
			ps := preflight.Check(e.cfg, preflight.Env{Workspace: e.paths.Workspace})
			noGit := control.GitOff(e.cfg, e.paths.Workspace, nil)
			untrusted, why := control.CheckTrust(e.cfg, e.getenv)
			if jsonOut {
				out := struct {
					Config    string        `json:"config"`
					Problems  []api.Problem `json:"problems"`
					NoGit     string        `json:"no_git,omitzero"`
					Untrusted []string      `json:"untrusted,omitempty"` // the commands not trusted here (`loopr trust`)
				}{Config: e.paths.Config, Problems: control.APIProblems(e.cfg, ps), NoGit: noGit}
				if untrusted != nil {
					out.Untrusted = untrusted.Commands
				}
				err := writeJSON(e.stdout, out)
				if err == nil && (len(ps) > 0 || untrusted != nil) {
					err = ExitStatus(1)
				}
				return err
			}
			if untrusted != nil {
				e.printUntrusted(why)
			}
			// "ok" only when nothing is wrong: with problems, the table
			// and one line on stderr that says the file itself is valid.
			switch {
			case e.paths.Config == "":
				fmt.Fprintln(e.stdout, "no loopr.yml found: using defaults (run `loopr init` to write one)")
			case len(ps) == 0 && untrusted == nil:
				fmt.Fprintf(e.stdout, "%s: ok\n", e.paths.Config)
			}
			if noGit != "" {
				fmt.Fprintf(e.stdout, "note: %s\n", noGit)
			}
			errUntrusted := errors.New("loopr.yml is not trusted on this machine: check the commands above, then run `loopr trust`")
			if len(ps) == 0 {
				if untrusted != nil {
					return errUntrusted
				}
				return nil
			}
			printProblems(e.stdout, e.cfg, ps)
			if untrusted != nil {
				fmt.Fprintln(e.stderr, "loopr:", errUntrusted)
			}
			valid := ""
			if e.paths.Config != "" {
				valid = e.paths.Config + " is valid, but "
			}
			return fmt.Errorf("%s%d %s would fail every iteration here: loops of those types will not start", valid, len(ps), plural(len(ps), "problem"))
		},
	}
	check.Flags().BoolVar(&jsonOut, "json", false, "print the problems as JSON (exit 1 when there are any)")
	c.AddCommand(check)
	return c
}

// printUntrusted says, for `loopr config check`, that loopr.yml's
// commands are not trusted here, and lists them.
func (e *env) printUntrusted(why string) {
	if why != "not trusted" {
		why = " (" + why + ")"
	} else {
		why = ""
	}
	fmt.Fprintf(e.stdout, "%s: its commands are not trusted on this machine%s: the daemon runs none of them\n", e.paths.Config, why)
	printCommands(e, trust.Commands(e.cfg))
}

// checkHooks runs `sh -n` on every hook command of the configuration and
// returns a *UsageError listing the ones that do not parse, each as a
// configuration error with its line and key.
func (e *env) checkHooks(ctx context.Context) error {
	cmds := e.cfg.HookCommands()
	if len(cmds) == 0 {
		return nil
	}
	var lines map[string]int
	if e.paths.Config != "" {
		if data, err := config.ReadFile(e.paths.Config); err == nil {
			lines = config.KeyLines(data)
		}
	}
	var errs []error
	for _, c := range cmds {
		if err := hooks.Syntax(ctx, c.Command); err != nil {
			errs = append(errs, &config.Error{File: filepath.Base(e.paths.Config), Line: lines[c.Key], Key: c.Key, Msg: err.Error()})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &UsageError{errors.Join(errs...)}
}

// printProblems prints preflight problems as an aligned table.
func printProblems(out io.Writer, c *config.Config, ps []preflight.Problem) {
	w := table(out)
	fmt.Fprintln(w, "TYPES\tPROBLEM\tWHAT TO DO")
	for _, p := range ps {
		fmt.Fprintf(w, "%s\t%s\t%s\n", p.TypesText(c), p.What, p.Fix)
	}
	w.Flush()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	if strings.HasSuffix(word, "ch") {
		return word + "es"
	}
	return word + "s"
}
