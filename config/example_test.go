package config_test

import (
	"fmt"

	"github.com/loopr-dev/loopr/config"
)

func ExampleParse() {
	cfg, err := config.Parse([]byte(`
concurrency:
  per_type: {ralph: 8}
loops:
  ralph: {max_iterations: 20, validate: [make check]}
types:
  review: {base: 70, max_running: 3, max_iterations: 5}
`), "loopr.yml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range cfg.Types() {
		l := cfg.Loop(t)
		fmt.Printf("%-6s base %3d  cap %2d  max_iterations %3d  validate %q\n", t, cfg.Base(t), cfg.TypeCap(t), l.MaxIterations, l.Validate)
	}
	name := cfg.Loop("review").Agent
	a, _ := cfg.Profile(name)
	fmt.Println("agent:", name, a.Preset, a.Argv())
	// Output:
	// plan   base  40  cap  2  max_iterations  10  validate []
	// spec   base  60  cap  5  max_iterations  25  validate []
	// phase  base  80  cap 20  max_iterations  50  validate []
	// ralph  base 100  cap  8  max_iterations  20  validate ["make check"]
	// review base  70  cap  3  max_iterations   5  validate []
	// agent: default claude [claude -p --output-format stream-json --verbose --dangerously-skip-permissions]
}

func ExampleParse_error() {
	_, err := config.Parse([]byte(`
concurrency:
  max_loops: 0
`), "loopr.yml")
	fmt.Println(err)
	// Output:
	// loopr.yml:3: concurrency.max_loops: must be > 0
}
