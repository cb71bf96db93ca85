package fsyncrate

import "testing"

func TestMeasure(t *testing.T) {
	t.Parallel()
	rate, err := Measure(t.TempDir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Errorf("Measure() = %v, want a positive rate", rate)
	}
	if _, err := Measure("/nonexistent/dir", 1); err == nil {
		t.Error("Measure(missing dir) = nil error")
	}
}
