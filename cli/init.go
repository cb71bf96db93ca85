package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/preflight"
	"github.com/loopr-dev/loopr/workspace"
)

func (e *env) initCmd() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "init",
		Short: "Write a commented loopr.yml with every key and its default",
		Args:  cobra.NoArgs,
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
			if _, err := f.Write(config.Template()); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s\n", path)
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	return c
}

func (e *env) configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	var jsonOut bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate loopr.yml and check what would fail every iteration here",
		Long: `Validate loopr.yml (errors name the line and key, exit 2), then check what
would make every iteration of a loop type fail in this workspace: an agent
binary that is not on PATH, a validate command whose program is missing, a
validate command that cannot work here (go test without a go.mod, npm test
without a package.json, cargo test without a Cargo.toml, pytest without a
Python project, make without a Makefile). Each problem is one line: the
loop types, what is wrong, what to do; any problem exits 1. The daemon runs
the same check and holds back loops of the affected types (reason
preflight) instead of spending their iterations.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			ps := preflight.Check(e.cfg, preflight.Env{Workspace: e.paths.Workspace})
			noGit := control.GitOff(e.cfg, e.paths.Workspace, nil)
			if jsonOut {
				err := writeJSON(e.stdout, struct {
					Config   string        `json:"config"`
					Problems []api.Problem `json:"problems"`
					NoGit    string        `json:"no_git,omitzero"`
				}{e.paths.Config, control.APIProblems(e.cfg, ps), noGit})
				if err == nil && len(ps) > 0 {
					err = ExitStatus(1)
				}
				return err
			}
			if e.paths.Config == "" {
				fmt.Fprintln(e.stdout, "no loopr.yml found: using defaults (run `loopr init` to write one)")
			} else {
				fmt.Fprintf(e.stdout, "%s: ok\n", e.paths.Config)
			}
			if noGit != "" {
				fmt.Fprintf(e.stdout, "note: %s\n", noGit)
			}
			if len(ps) == 0 {
				return nil
			}
			printProblems(e.stdout, e.cfg, ps)
			return fmt.Errorf("%d %s would fail every iteration: loops of those types will not start", len(ps), plural(len(ps), "problem"))
		},
	}
	check.Flags().BoolVar(&jsonOut, "json", false, "print the problems as JSON (exit 1 when there are any)")
	c.AddCommand(check)
	return c
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
	return word + "s"
}
