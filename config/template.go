package config

import (
	_ "embed"
	"slices"
)

//go:embed template.yml
var template []byte

// Template returns the commented loopr.yml that `loopr init` writes: every
// key with its default and a one-line comment. Parsing it gives Default().
func Template() []byte { return slices.Clone(template) }
