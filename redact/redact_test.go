package redact

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestStringReplacesSecretsAndShapes(t *testing.T) {
	r := New()
	if !r.Add("DB_PASSWORD", "hunter2-very-secret") {
		t.Fatal("Add refused a long value")
	}
	if r.Add("PIN", "1234") {
		t.Fatal("Add took a value shorter than MinLen")
	}
	in := "pw=hunter2-very-secret gh=ghp_" + strings.Repeat("a", 36) + " key=sk-ant-api03-" + strings.Repeat("Z", 30) +
		" aws=AKIAABCDEFGHIJKLMNOP slack=xoxb-1234567890-abcdef pin=1234"
	got := r.String(in)
	for _, leak := range []string{"hunter2", "ghp_aaa", "sk-ant", "AKIAABCD", "xoxb-"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q survived: %s", leak, got)
		}
	}
	for _, mark := range []string{"[redacted DB_PASSWORD]", "[redacted github_token]", "[redacted api_key]",
		"[redacted aws_access_key]", "[redacted slack_token]", "pin=1234"} {
		if !strings.Contains(got, mark) {
			t.Errorf("want %q in %s", mark, got)
		}
	}
	if got := (*Redactor)(nil).String("x AKIAABCDEFGHIJKLMNOP"); got != "x [redacted aws_access_key]" {
		t.Errorf("nil Redactor: %q", got)
	}
	if plain := "ordinary output: sk-short, ghp_x, AKIA lowercase"; r.String(plain) != plain {
		t.Errorf("ordinary text changed: %q", r.String(plain))
	}
}

func TestLongerSecretContainingAnotherIsNamedWhole(t *testing.T) {
	r := New()
	r.Add("SHORT", "abcdef")
	r.Add("LONG", "xxabcdefyy")
	if got := r.String("1 xxabcdefyy 2 abcdef"); got != "1 [redacted LONG] 2 [redacted SHORT]" {
		t.Fatal(got)
	}
}

// The writer must find a secret however the output is cut into writes, and
// in a line far longer than its buffer.
func TestWriterFindsSecretsAcrossWrites(t *testing.T) {
	secret := "s3cr3t-" + strings.Repeat("q", 40)
	r := New()
	r.Add("TOKEN", secret)
	var in strings.Builder
	for i := range 200 {
		in.WriteString(strings.Repeat("x", i*13%97))
		in.WriteString(secret)
		if i%3 == 0 {
			in.WriteString("\n")
		}
	}
	in.WriteString(strings.Repeat("y", 3*maxLine)) // a line with no end, longer than the buffer
	in.WriteString(secret)
	in.WriteString(strings.Repeat("z", maxLine+7))
	in.WriteString(secret)
	src := []byte(in.String())
	want := r.String(in.String())
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		var out bytes.Buffer
		w := r.Writer(&out)
		for b := src; len(b) > 0; {
			n := min(len(b), 1+rng.IntN(2*len(secret)+trial*5000))
			if _, err := w.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "s3cr3t") {
			t.Fatalf("trial %d: the secret survived a cut", trial)
		}
		if out.String() != want {
			t.Fatalf("trial %d: writer output differs from String (%d vs %d bytes)", trial, out.Len(), len(want))
		}
	}
}

func BenchmarkWriterLongLine(b *testing.B) {
	r := New()
	r.Add("TOKEN", "s3cr3t-"+strings.Repeat("q", 40))
	chunk := []byte(strings.Repeat("lorem ipsum dolor ", 2000))
	b.SetBytes(int64(len(chunk)))
	w := r.Writer(ioDiscard{})
	for b.Loop() {
		w.Write(chunk)
	}
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }
