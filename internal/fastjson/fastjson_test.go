package fastjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\r", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "日本", "\u2028", "\u2029", "\xff", "\xe6\x97", "😀", "{", "}", "[", "]", ",", ":"}
	var b strings.Builder
	for range r.IntN(20) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := randomString(r)
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendString(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString([]byte %q) = %s, want %s", s, got, want)
		}
	}
}

func TestAppendTimeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -7*3600), time.FixedZone("z", 25*3600),
		time.FixedZone("s", 3600+17)}
	for range 20000 {
		tm := time.Unix(r.Int64N(1<<38)-1<<37, r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		if r.IntN(5) == 0 {
			tm = tm.Truncate(time.Second)
		}
		want, werr := json.Marshal(tm)
		got, gerr := AppendTime(nil, tm)
		if (werr == nil) != (gerr == nil) || (werr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("AppendTime(%v) = %s, %v; want %s, %v", tm, got, gerr, want, werr)
		}
	}
	if got, err := AppendTime([]byte("x"), time.Time{}); err != nil || string(got) != `x"0001-01-01T00:00:00Z"` {
		t.Errorf("AppendTime(zero) = %s, %v", got, err)
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	fs := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 123456789e15, math.MaxFloat64,
		math.SmallestNonzeroFloat64, math.Inf(1), math.NaN(), 60, 0.3}
	for range 5000 {
		fs = append(fs, math.Float64frombits(r.Uint64()), r.NormFloat64()*math.Pow(10, float64(r.IntN(60)-30)))
	}
	for _, f := range fs {
		want, werr := json.Marshal(f)
		got, gerr := AppendFloat(nil, f)
		if (werr == nil) != (gerr == nil) || (werr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("AppendFloat(%v) = %s, %v; want %s, %v", f, got, gerr, want, werr)
		}
	}
}

// randomValue builds a random JSON value of nested arrays and objects.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case depth > 3 || k < 2:
		return []any{randomString(r), r.IntN(1000) - 500, r.Float64(), true, false, nil}[r.IntN(6)]
	case k < 5:
		a := []any{}
		for range r.IntN(4) {
			a = append(a, randomValue(r, depth+1))
		}
		return a
	default:
		o := map[string]any{}
		for range r.IntN(4) {
			o[randomString(r)] = randomValue(r, depth+1)
		}
		return o
	}
}

func TestIndenterMatchesEncoder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 3000 {
		v := randomValue(r, 0)
		if _, ok := v.([]any); !ok {
			if _, ok := v.(map[string]any); !ok {
				v = []any{v}
			}
		}
		compact, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		ix := NewIndenter(&got)
		for rest := compact; len(rest) > 0; { // in random pieces
			n := 1 + r.IntN(len(rest))
			if _, err := ix.Write(rest[:n]); err != nil {
				t.Fatalf("case %d: Write() error: %v", i, err)
			}
			rest = rest[n:]
		}
		if err := ix.Close(); err != nil {
			t.Fatalf("case %d: Close() error: %v", i, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("case %d: indented %s\ngot  %q\nwant %q", i, compact, got.String(), want.String())
		}
		// Cut short, it must say so.
		if len(compact) > 2 {
			ix := NewIndenter(&bytes.Buffer{})
			ix.Write(compact[:len(compact)-1])
			if err := ix.Close(); err == nil {
				t.Fatalf("case %d: Close() of %s cut short: error = nil", i, compact)
			}
		}
	}
	for _, bad := range []string{"", "1", `"x"`, `[1]]`, `[1] 2`, `{]`, `[}`} {
		ix := NewIndenter(&bytes.Buffer{})
		_, werr := ix.Write([]byte(bad))
		if cerr := ix.Close(); werr == nil && cerr == nil {
			t.Errorf("Indenter(%q): no error", bad)
		}
	}
}
