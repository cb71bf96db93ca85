package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionLine: the commit comes from the build's VCS stamp, else the
// -ldflags Commit, else a module pseudo-version; without any the line
// says the commit is unknown and why, never just leaves it out.
func TestVersionLine(t *testing.T) {
	// Not parallel: it sets Commit.
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "e467787d3609aaaabbbbccccddddeeeeffff0000"}, {Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name   string
		bi     *debug.BuildInfo
		commit string
		want   string
	}{
		{"vcs stamp", stamped, "0123456789ab", "(commit e467787d3609, modified, go"},
		{"ldflags", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "0123456789abcdef", "(commit 0123456789ab, go"},
		{"pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260125120000-1a2b3c4d5e6f"}}, "", "(commit 1a2b3c4d5e6f, go"},
		{"pseudo-version after a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20260125120000-1a2b3c4d5e6f+incompatible"}}, "", "(commit 1a2b3c4d5e6f, go"},
		{"a release", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "", "(commit unknown: built without git information"},
		{"no build info", nil, "", "(commit unknown: built without git information"},
	}
	orig := Commit
	t.Cleanup(func() { Commit = orig })
	for _, tc := range tests {
		Commit = tc.commit
		if got := versionLine(tc.bi); !strings.HasPrefix(got, "loopr "+Version+" ") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: versionLine() = %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
}
