package loopmgr

import "testing"

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := Fingerprint("validate `go test ./...` exited 1",
		"Iteration 2 of 10 failed.\n--- FAIL: TestX (0.03s)\n    /tmp/TestX123/a_test.go:12: got 41, want 42\nat 2026-11-25T09:12:01Z commit 3f9a2c1d")
	same := Fingerprint("validate `go test ./...` exited 1",
		"Iteration 3 of 10 failed.\n--- FAIL: TestX (0.05s)\n    /tmp/TestX987/a_test.go:12: got 43, want 44\nat 2026-11-25T10:00:59Z commit 77be01ff0")
	other := Fingerprint("validate `go test ./...` exited 1",
		"Iteration 3 of 10 failed.\n--- FAIL: TestY (0.05s)\n    /tmp/TestY987/b_test.go:12: undefined: Foo")
	otherCmd := Fingerprint("validate `go vet ./...` exited 1",
		"Iteration 2 of 10 failed.\n--- FAIL: TestX (0.03s)\n    /tmp/TestX123/a_test.go:12: got 41, want 42\nat 2026-11-25T09:12:01Z commit 3f9a2c1d")
	if base != same {
		t.Errorf("the same failure with other numbers, paths, times and hashes: fingerprints %s and %s differ", base, same)
	}
	if base == other || base == otherCmd {
		t.Errorf("different failures share fingerprint %s", base)
	}
}
