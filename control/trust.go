package control

import (
	"fmt"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/trust"
)

// SetTrust records what of loopr.yml waits for `loopr trust` (the daemon
// and the CLI decide, package trust); nil: nothing does. While the
// configuration in force is untrusted (t not Held), every waiting loop is
// held back (reason untrusted), and the merge queue, hooks, landings and
// notifications run nothing.
func (s *Service) SetTrust(t *api.Trust) {
	s.gates.mu.Lock()
	s.gates.trust = t
	s.gates.mu.Unlock()
}

// Trust returns what SetTrust recorded.
func (s *Service) Trust() *api.Trust {
	s.gates.mu.Lock()
	defer s.gates.mu.Unlock()
	return s.gates.trust
}

// Untrusted returns why the configuration in force may run nothing, ""
// when it may (it is trusted; a reload held for trust leaves it so).
func (s *Service) Untrusted() string {
	if t := s.Trust(); t != nil && !t.Held {
		return t.Text
	}
	return ""
}

// ErrUntrusted is the error of a step refused because the configuration
// in force is untrusted: what to do, in one line.
func (s *Service) ErrUntrusted() error {
	if text := s.Untrusted(); text != "" {
		return &InputError{Msg: text}
	}
	return nil
}

// UntrustedText is the untrusted gate's reason text.
const UntrustedText = "untrusted loopr.yml: none of its commands runs until you check them and run `loopr trust`"

// CheckTrust checks c against the trust file of the user whose environment
// getenv reads (package trust): nil when c may run its commands; else
// what waits for trust — every command of c — and why (an unreadable
// trust file is a why, and c is not trusted).
func CheckTrust(c *config.Config, getenv func(string) string) (t *api.Trust, why string) {
	store, err := trust.DefaultStore(getenv)
	if err == nil {
		var st trust.State
		if st, err = store.Check(c, getenv); err == nil && st.Trusted {
			return nil, st.Why
		}
		why = st.Why
	}
	if err != nil {
		why = err.Error()
	}
	var lines []string
	for _, cmd := range trust.Commands(c) {
		lines = append(lines, cmd.String())
	}
	return &api.Trust{File: c.File, Commands: lines, Since: time.Now().UTC(), Text: UntrustedText, Action: "loopr trust"}, why
}

// StartTrust refuses the settings of an untrusted c that act before any
// loop could be held back: an etcd store (opening it sends and takes
// records, loops included, to and from the endpoints the file names) and
// api.listen (a TCP listener that takes loops from the network). It is
// nil when c sets neither, or is trusted.
func StartTrust(c *config.Config, getenv func(string) string) error {
	var keys []string
	if c.Store.Backend == store.BackendEtcd {
		keys = append(keys, "store.etcd")
	}
	if c.API.Listen != "" {
		keys = append(keys, "api.listen")
	}
	if len(keys) == 0 {
		return nil
	}
	t, why := CheckTrust(c, getenv)
	if t == nil {
		return nil
	}
	return fmt.Errorf("%s sets %s, which act as soon as loopr opens its store, and is not trusted on this machine (%s): check it, run `loopr trust`, then try again",
		c.File, strings.Join(keys, " and "), why)
}
