package loopmgr

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
)

// TestKillOrphansFindsUnrecordedAgents starts what a crashed daemon leaves
// behind when it dies before recording an agent's pid: a process group
// (a shell and its child) carrying the loop's LOOPR_HOME and LOOPR_LOOP_ID.
// killOrphans kills exactly that group, not the processes of another loop
// or another home.
func TestKillOrphansFindsUnrecordedAgents(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("orphans are found in /proc (Linux)")
	}
	t.Parallel()
	home := filepath.Join(t.TempDir(), ".loopr")
	other := filepath.Join(t.TempDir(), ".loopr")
	spawn := func(home, id string) *exec.Cmd {
		// sh waits for its child, so the group has two members.
		cmd := exec.Command("sh", "-c", "sleep 60; echo done")
		cmd.Env = append(os.Environ(), "LOOPR_HOME="+home, "LOOPR_LOOP_ID="+id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		})
		return cmd
	}
	stale := spawn(home, "stale")
	otherLoop := spawn(home, "healthy")
	otherHome := spawn(other, "stale")
	waited := make(chan error, 1)
	go func() { waited <- stale.Wait() }()
	// Let sh fork its sleep.
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for len(loopProcs(home, "stale")) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	if n := killOrphans(home, map[string]bool{"stale": true}); n != 2 {
		t.Errorf("killOrphans() found %d processes, want 2 (sh and its sleep)", n)
	}
	select {
	case <-waited:
	case <-time.After(testslack.Scale(5 * time.Second)):
		t.Fatal("the orphaned agent is still running")
	}
	if got := loopProcs(home, "stale"); len(got) != 0 {
		t.Errorf("processes of the stale loop left alive: %+v", got)
	}
	for name, cmd := range map[string]*exec.Cmd{"another loop": otherLoop, "another home": otherHome} {
		if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
			t.Errorf("the process of %s was killed: %v", name, err)
		}
	}
	if n := killOrphans(home, nil); n != 0 {
		t.Errorf("killOrphans(no ids) = %d, want 0", n)
	}
}

// loopProcs lists the live processes whose environment holds
// LOOPR_HOME=home and LOOPR_LOOP_ID=id.
func loopProcs(home, id string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		s := "\x00" + string(env)
		if !strings.Contains(s, "\x00LOOPR_HOME="+home+"\x00") || !strings.Contains(s, "\x00LOOPR_LOOP_ID="+id+"\x00") {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}
