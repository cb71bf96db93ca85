package config

import (
	_ "embed"
	"slices"
)

//go:embed template.yml
var template []byte

//go:embed short.yml
var shortTemplate []byte

// Template returns the commented loopr.yml that `loopr init --full`
// writes: every key with its default and a one-line comment. Parsing it
// gives Default().
func Template() []byte { return slices.Clone(template) }

// ShortTemplate returns the loopr.yml that `loopr init` writes: the keys
// people change (the agent, ralph's validate, approval, the main cap, the
// budget, worktrees), each at its default with a comment. Parsing it gives
// Default() too.
func ShortTemplate() []byte { return slices.Clone(shortTemplate) }
