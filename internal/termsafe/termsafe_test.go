package termsafe

import "testing"

func TestEscape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, line, text string
	}{
		{"plain", "Add OAuth login", "Add OAuth login", "Add OAuth login"},
		{"unicode kept", "café — 日本 ✓", "café — 日本 ✓", "café — 日本 ✓"},
		{"osc52", "x\x1b]52;c;aGk=\ay", `x\x1b]52;c;aGk=\ay`, `x\x1b]52;c;aGk=\ay`},
		{"clear", "\x1b[2Jz", `\x1b[2Jz`, `\x1b[2Jz`},
		{"newline and tab", "a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"carriage return", "a\rb", `a\rb`, `a\rb`},
		{"c1 csi", "a\u009b2J", `a\u009b2J`, `a\u009b2J`},
		{"bidi override", "a\u202eb", `a\u202eb`, `a\u202eb`},
		{"invalid utf8", "a\xffb", `a\xffb`, `a\xffb`},
		{"del", "a\x7f", `a\x7f`, `a\x7f`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Line(tt.in); got != tt.line {
				t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
			}
			if got := Text(tt.in); got != tt.text {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.text)
			}
		})
	}
}
