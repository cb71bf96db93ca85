package etcdtest

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAuthCommandsInDocs: the etcdctl commands docs/several-machines.md
// gives in "TLS and users" are the steps EnableAuth runs (the store,
// cluster and e2e tests enable auth with it).
func TestAuthCommandsInDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/several-machines.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## TLS and users\n")
	if i < 0 {
		t.Fatal(`docs/several-machines.md has no "## TLS and users" section`)
	}
	section := doc[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	var got []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "etcdctl ") {
			got = append(got, line)
		}
	}
	want := AuthCommands(Auth{User: "loopr", Role: "loopr-web", Prefix: "/loopr/web"})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("etcdctl commands in docs/several-machines.md (-EnableAuth's steps +the docs):\n%s", diff)
	}
}
