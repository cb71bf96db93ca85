package cli

import (
	"os"
	"testing"
)

// TestMain keeps plan and add from starting daemons behind the tests'
// backs: the tests that want a daemon run one themselves.
func TestMain(m *testing.M) {
	os.Setenv(noStartEnv, "1")
	os.Exit(m.Run())
}
