package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/store"
)

func (e *env) exportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "export [FILE]",
		Short: "Write every loop record as JSON Lines (to stdout or FILE)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withReader(func(b Backend) error {
				if len(args) == 0 || args[0] == "-" {
					bw := bufio.NewWriter(e.stdout)
					if _, err := b.Export(cmd.Context(), bw); err != nil {
						return err
					}
					return bw.Flush()
				}
				// Write to a temporary file and rename, so a failed export
				// never leaves a truncated backup behind.
				tmp := args[0] + ".tmp"
				f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
				if err != nil {
					return err
				}
				bw := bufio.NewWriter(f)
				n, err := b.Export(cmd.Context(), bw)
				if err == nil {
					err = bw.Flush()
				}
				if err == nil {
					err = f.Sync()
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					err = os.Rename(tmp, args[0])
				}
				if err != nil {
					os.Remove(tmp)
					return err
				}
				fmt.Fprintf(e.stderr, "exported %d loops to %s\n", n, args[0])
				return nil
			})
		},
	}
}

func (e *env) importCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Load loop records from JSON Lines (all or nothing; ids and times kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = e.stdin
			name := "stdin"
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return &UsageError{err}
				}
				defer f.Close()
				r, name = f, args[0]
			}
			loops, err := store.ReadJSONL(r)
			if err != nil {
				return &UsageError{fmt.Errorf("%s: %w", name, err)}
			}
			return e.withBackend(func(b Backend) error {
				n, err := b.Import(cmd.Context(), loops)
				if err != nil {
					return fmt.Errorf("import %s: %w", name, err)
				}
				fmt.Fprintf(e.stdout, "imported %d loops\n", n)
				return nil
			})
		},
	}
}
