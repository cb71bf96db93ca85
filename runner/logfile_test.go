package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limit  int64
		writes []string
		want   string
	}{
		{"fits", 10, []string{"abc", "defghij"}, "abcdefghij"},
		{"one big write", 10, []string{"0123456789ABCDEFGHIJ"}, "01234\n\n[loopr: 10 bytes of output cut here; this log keeps the first 5 and the last 5 bytes]\n\nFGHIJ"},
		{"many small writes", 10, strings.Split("0123456789ABCDEFGHIJ", ""), "01234\n\n[loopr: 10 bytes of output cut here; this log keeps the first 5 and the last 5 bytes]\n\nFGHIJ"},
		{"tail just full", 10, []string{"01234", "56", "789"}, "0123456789"},
		{"one byte over", 4, []string{"abcde"}, "ab\n\n[loopr: 1 bytes of output cut here; this log keeps the first 2 and the last 2 bytes]\n\nde"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "x.log")
			l, err := createLog(path, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.writes {
				if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, path); got != tt.want {
				t.Errorf("log = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadTail(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, []byte("first line\nsecond line\nthird é\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		want string
	}{
		{1000, "first line\nsecond line\nthird é\n"},
		{15, "third é\n"}, // starts mid-line: the partial line goes
		{3, ""},           // only the end of the last line
		{0, ""},
	}
	for _, tt := range tests {
		if got := readTail(path, tt.n); got != tt.want {
			t.Errorf("readTail(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	// Without a line break near the cut, only a partial rune is dropped;
	// invalid UTF-8 inside is replaced.
	if err := os.WriteFile(path, []byte("xxé y\xffy"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{6: "é y\uFFFDy", 5: " y\uFFFDy"} {
		if got := readTail(path, n); got != want {
			t.Errorf("readTail(%d) = %q, want %q", n, got, want)
		}
	}
	if got := readTail(filepath.Join(t.TempDir(), "missing"), 10); got != "" {
		t.Errorf("readTail(missing) = %q, want empty", got)
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 8, "01234..."},
		{"ééééé", 8, "éé..."}, // never splits a rune
		{"abc", 2, ""},
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
