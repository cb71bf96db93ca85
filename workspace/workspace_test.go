package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	withCfg := filepath.Join(root, "proj")
	sub := filepath.Join(withCfg, "a", "b")
	repo := filepath.Join(root, "repo")
	repoSub := filepath.Join(repo, "pkg")
	plain := filepath.Join(root, "plain")
	for _, d := range []string{sub, filepath.Join(repo, ".git"), repoSub, plain} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(withCfg, ConfigName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string { return func(string) string { return v } }
	tests := []struct {
		name, cwd, home, config, env string
		want                         Paths
	}{
		{"config found upward", sub, "", "", "",
			Paths{Workspace: withCfg, Home: filepath.Join(withCfg, ".loopr"), Config: filepath.Join(withCfg, ConfigName)}},
		{"git root without config", repoSub, "", "", "",
			Paths{Workspace: repo, Home: filepath.Join(repo, ".loopr")}},
		{"plain directory", plain, "", "", "",
			Paths{Workspace: plain, Home: filepath.Join(plain, ".loopr")}},
		{"home flag wins over env", plain, filepath.Join(root, "h"), "", "/elsewhere",
			Paths{Workspace: plain, Home: filepath.Join(root, "h")}},
		{"LOOPR_HOME", plain, "", "", filepath.Join(root, "envhome"),
			Paths{Workspace: plain, Home: filepath.Join(root, "envhome")}},
		{"explicit config", plain, "", filepath.Join(repo, "custom.yml"), "",
			Paths{Workspace: repo, Home: filepath.Join(repo, ".loopr"), Config: filepath.Join(repo, "custom.yml"), ConfigSet: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tc.cwd, tc.home, tc.config, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
