package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/config"
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
	c.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Validate loopr.yml; errors name the line and key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			if e.paths.Config == "" {
				fmt.Fprintln(e.stdout, "no loopr.yml found: using defaults (run `loopr init` to write one)")
				return nil
			}
			fmt.Fprintf(e.stdout, "%s: ok\n", e.paths.Config)
			return nil
		},
	})
	return c
}
