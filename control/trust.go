package control

import "github.com/loopr-dev/loopr/api"

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
