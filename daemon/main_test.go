package daemon_test

import (
	"os"
	"testing"

	"github.com/loopr-dev/loopr/internal/trusttest"
)

// TestMain gives the daemons of these tests a private trust file in which
// every loopr.yml is trusted (the reload tests write theirs).
func TestMain(m *testing.M) {
	cleanup := trusttest.Setup()
	code := m.Run()
	cleanup()
	os.Exit(code)
}
