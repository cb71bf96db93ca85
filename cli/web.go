package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/skip2/go-qrcode"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
)

func (e *env) webCmd() *cobra.Command {
	var noQR, invert, jsonOut bool
	c := &cobra.Command{
		Use:   "web",
		Short: "Print the web dashboard's address, a one-time login link and its QR code",
		Long: `Print the address of the web dashboard the daemon serves (api.web: true in
loopr.yml; docs/web.md) and a login link that signs one browser in once,
within 10 minutes, without typing the token; then the link as a QR code in
the terminal, for a phone on the same network. Each run makes a new link.

The QR code is drawn for a dark terminal (light modules in the terminal's
text colour); --invert draws it for a light one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			c, err := e.dialDaemon(cmd.Context())
			if errors.Is(err, client.ErrNoDaemon) {
				return fmt.Errorf("no daemon runs here: the dashboard is the daemon's (set api.web: true, then loopr daemon --detach): %w", err)
			}
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.WebLogin(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(e.stdout, res)
			}
			fmt.Fprintf(e.stdout, "web dashboard: %s\n", res.URL)
			fmt.Fprintf(e.stdout, "login link (works once, until %s):\n  %s\n", res.ExpiresAt.Local().Format(time.TimeOnly), res.LoginURL)
			if !noQR {
				fmt.Fprintln(e.stdout)
				return writeQR(e.stdout, res.LoginURL, invert)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&noQR, "no-qr", false, "print no QR code")
	c.Flags().BoolVar(&invert, "invert", false, "draw the QR code for a light terminal background")
	c.Flags().BoolVar(&jsonOut, "json", false, "print url, login_url and expires_at as JSON")
	return c
}

// writeQR draws text as a QR code with half blocks: two rows of modules
// per line of text. By default a dark module is a blank and a light one
// a block, for a terminal with a dark background; invert swaps them.
func writeQR(w io.Writer, text string, invert bool) error {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return fmt.Errorf("qr code: %w", err)
	}
	bm := q.Bitmap() // true: dark, quiet zone included
	lit := func(y, x int) bool { return y >= len(bm) && !invert || y < len(bm) && bm[y][x] == invert }
	var b strings.Builder
	for y := 0; y < len(bm); y += 2 {
		for x := range bm[y] {
			switch top, bot := lit(y, x), lit(y+1, x); {
			case top && bot:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bot:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}
