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

// A mark put in is not searched again: a secret that is part of another
// secret's mark must not mangle it.
func TestMarkIsNotRedactedAgain(t *testing.T) {
	r := New()
	r.Add("API_TOKEN", "tok-0123456789")
	r.Add("WORD", "redacted")
	if got, want := r.String("a tok-0123456789 b"), "a [redacted API_TOKEN] b"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// A secret read from a file ends in a newline the agent never prints; a
// key of several lines is printed, and streamed, line by line.
func TestAddTrimsAndRegistersLines(t *testing.T) {
	r := New()
	if !r.Add("TOKEN", "file-token-123\n") {
		t.Fatal("Add refused a value with a trailing newline")
	}
	if r.Add("PIN", "  1234 \n") {
		t.Fatal("Add took a value shorter than MinLen once trimmed")
	}
	key := "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END KEY-----\n"
	r.Add("KEY", key)
	var out bytes.Buffer
	w := r.Writer(&out)
	in := "token=file-token-123 done\n" + key + "after\n"
	for i := 0; i < len(in); i += 7 { // cut into writes that split every line
		if _, err := w.Write([]byte(in[i:min(len(in), i+7)])); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	got := out.String()
	for _, leak := range []string{"file-token", "MIIEvQ", "BKcwgg"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q survived: %s", leak, got)
		}
	}
	if !strings.Contains(got, "token=[redacted TOKEN] done") || !strings.Contains(got, "[redacted KEY]") {
		t.Errorf("marks missing: %s", got)
	}
}

// A line of key-like characters with no end must not make the Writer hold
// it all: the open-ended shapes are bounded, so it writes as it goes.
func TestWriterBoundedOnEndlessTokenLikeLine(t *testing.T) {
	var out bytes.Buffer
	w := New().Writer(&out)
	w.Write([]byte(" sk-"))
	chunk := []byte(strings.Repeat("a", 4096))
	for range 64 {
		w.Write(chunk)
	}
	if out.Len() < 128<<10 {
		t.Fatalf("wrote %d of %d bytes before the end of the line: the writer holds the rest", out.Len(), 64*4096)
	}
	w.Close()
	if !strings.HasPrefix(out.String(), " [redacted api_key]") {
		t.Fatalf("output starts %q", out.String()[:40])
	}
}

// A CLI's JSON events carry a secret with its quotes and backslashes
// escaped: that form is redacted too.
func TestJSONEscapedSecret(t *testing.T) {
	r := New()
	r.Add("PW", `pa"ss\word-x`)
	got := r.String(`{"type":"text","text":"pa\"ss\\word-x"} and pa"ss\word-x`)
	if want := `{"type":"text","text":"[redacted PW]"} and [redacted PW]`; got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
}
