package cli

import (
	"os"
	"testing"

	"github.com/loopr-dev/loopr/internal/trusttest"
)

// TestMain keeps plan and add from starting daemons behind the tests'
// backs: the tests that want a daemon run one themselves.
func TestMain(m *testing.M) {
	os.Setenv(noStartEnv, "1")
	cleanup := trusttest.Setup() // a private trust file; every loopr.yml trusted
	code := m.Run()
	cleanup()
	os.Exit(code)
}
