package testslack

import (
	"testing"
	"time"
)

func TestFactor(t *testing.T) {
	t.Setenv("LOOPR_TEST_SLACK", "")
	base := Factor()
	if base < 2 {
		t.Fatalf("Factor() = %v, want ≥ 2", base)
	}
	t.Setenv("LOOPR_TEST_SLACK", "3")
	if got := Factor(); got < 3*2 {
		t.Errorf("Factor() with LOOPR_TEST_SLACK=3 = %v, want ≥ 6", got)
	}
	for _, bad := range []string{"0.5", "-1", "NaN", "Inf", "1e9", "x"} {
		t.Setenv("LOOPR_TEST_SLACK", bad)
		if got := Factor(); got > 1000*2*1000 || got < 2 {
			t.Errorf("Factor() with LOOPR_TEST_SLACK=%s = %v", bad, got)
		}
	}
}

func TestWait(t *testing.T) {
	t.Setenv("LOOPR_TEST_SLACK", "")
	n := 0
	if !Wait(time.Second, time.Millisecond, func() bool { n++; return n == 3 }) {
		t.Error("Wait() = false for a condition that held at the third poll")
	}
	began := time.Now()
	if Wait(10*time.Millisecond, time.Millisecond, func() bool { return false }) {
		t.Error("Wait() = true for a condition that never held")
	}
	if took := time.Since(began); took < 20*time.Millisecond {
		t.Errorf("Wait() gave up after %s, before twice its limit", took)
	}
}
