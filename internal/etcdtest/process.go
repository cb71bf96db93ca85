package etcdtest

import (
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"github.com/loopr-dev/loopr/internal/testslack"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Member is one etcd member running as its own process (the binary of
// ./etcdmain), which a test can kill with SIGKILL and start again on the
// same data and ports.
type Member struct {
	Name                 string
	ClientPort, PeerPort int
	Dir                  string // data directory
	Log                  string // the member's stdout and stderr, across restarts

	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Endpoint is the member's client URL.
func (m *Member) Endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", m.ClientPort) }

// ProcOptions tune StartProcesses.
type ProcOptions struct {
	// NoFsync passes --unsafe-no-fsync (faster tests; never for a
	// benchmark that claims durability).
	NoFsync bool
	// MaxTxnOps is --max-txn-ops; 0 means 16384, as
	// docs/several-machines.md tells users to run etcd.
	MaxTxnOps uint
}

// Processes is an etcd cluster of real processes on 127.0.0.1.
type Processes struct {
	Members []*Member
	tb      testing.TB
}

// Endpoints are the client URLs of every member.
func (p *Processes) Endpoints() []string {
	var e []string
	for _, m := range p.Members {
		e = append(e, m.Endpoint())
	}
	return e
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary builds ./etcdmain once per test binary and returns its path: a
// file under the user's cache directory (go build's own cache makes a
// rebuild a link, about 2 s), replaced atomically so that test binaries
// running at once never see half a file.
func Binary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		dir = filepath.Join(dir, "loopr-test")
		if os.MkdirAll(dir, 0o755) != nil { // a read-only home: the temporary directory
			dir = filepath.Join(os.TempDir(), "loopr-test")
			if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
				return
			}
		}
		tmp, err := os.CreateTemp(dir, "etcd-*.tmp")
		if err != nil {
			binErr = err
			return
		}
		tmp.Close()
		out, err := exec.Command("go", "build", "-o", tmp.Name(), "github.com/loopr-dev/loopr/internal/etcdtest/etcdmain").CombinedOutput()
		if err != nil {
			os.Remove(tmp.Name())
			binErr = fmt.Errorf("go build etcdmain: %v\n%s", err, out)
			return
		}
		binPath = filepath.Join(dir, "etcd")
		if binErr = os.Rename(tmp.Name(), binPath); binErr != nil {
			os.Remove(tmp.Name())
		}
	})
	if binErr != nil {
		tb.Fatalf("etcdtest: %v", binErr)
	}
	return binPath
}

// StartProcesses starts an n-member etcd cluster, each member a real etcd
// process on free 127.0.0.1 ports with its own data directory, waits
// until every member reports itself healthy, and kills them all when tb
// ends. When tb has failed, the tail of each member's log is logged.
func StartProcesses(tb testing.TB, n int, o ProcOptions) *Processes {
	tb.Helper()
	bin := Binary(tb)
	if o.MaxTxnOps == 0 {
		o.MaxTxnOps = 16384
	}
	p := &Processes{tb: tb}
	logs := tb.TempDir()
	var peers []string
	for i := range n {
		m := &Member{Name: fmt.Sprintf("m%d", i), Dir: filepath.Join(tb.TempDir(), "data")}
		var err error
		if m.ClientPort, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		if m.PeerPort, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		m.Log = filepath.Join(logs, m.Name+".log")
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", m.Name, m.PeerPort))
		p.Members = append(p.Members, m)
	}
	for _, m := range p.Members {
		peer := fmt.Sprintf("http://127.0.0.1:%d", m.PeerPort)
		m.args = []string{bin,
			"--name", m.Name, "--data-dir", m.Dir,
			"--listen-client-urls", m.Endpoint(), "--advertise-client-urls", m.Endpoint(),
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "loopr-test",
			"--max-txn-ops", fmt.Sprint(o.MaxTxnOps),
			"--log-level", "warn",
		}
		if o.NoFsync {
			m.args = append(m.args, "--unsafe-no-fsync")
		}
	}
	tb.Cleanup(func() {
		for _, m := range p.Members {
			m.kill()
		}
		if tb.Failed() {
			for _, m := range p.Members {
				b, _ := os.ReadFile(m.Log)
				tb.Logf("etcd member %s (%s), last lines of %s:\n%s", m.Name, m.Endpoint(), m.Log, lastLines(b, 20))
			}
		}
	})
	for _, m := range p.Members { // a member is healthy only once a quorum is up
		if err := m.start(); err != nil {
			tb.Fatalf("etcdtest: %v", err)
		}
	}
	for _, m := range p.Members {
		if err := m.waitHealthy(30 * time.Second); err != nil {
			tb.Fatalf("etcdtest: %v", err)
		}
	}
	return p
}

// Kill kills member i with SIGKILL and waits for the process to be gone.
func (p *Processes) Kill(i int) {
	p.tb.Helper()
	p.Members[i].kill()
}

// Restart starts member i again (after Kill) on the same data directory
// and ports, and waits until it is healthy (it has rejoined the cluster).
func (p *Processes) Restart(i int) {
	p.tb.Helper()
	m := p.Members[i]
	m.kill()
	if err := m.start(); err != nil {
		p.tb.Fatalf("etcdtest: restart: %v", err)
	}
	if err := m.waitHealthy(30 * time.Second); err != nil {
		p.tb.Fatalf("etcdtest: restart: %v", err)
	}
}

func (m *Member) start() error {
	logf, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- started %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a signal meant for the test (^C) is not
	// delivered to the member twice, and the test decides when it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd member %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

func (m *Member) kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Alive reports whether member i's process is running.
func (p *Processes) Alive(i int) bool {
	m := p.Members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Leader is the index of the member that is the raft leader, asked of
// the live members through etcd's JSON gateway (/v3/maintenance/status);
// it fails the test when none knows a leader.
func (p *Processes) Leader() int {
	p.tb.Helper()
	c := &http.Client{Timeout: testslack.Scale(2 * time.Second)}
	var last string
	for deadline := time.Now().Add(testslack.Scale(10 * time.Second)); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ids := map[string]int{} // member id → index
		leader := ""
		for i, m := range p.Members {
			if !p.Alive(i) {
				continue
			}
			resp, err := c.Post(m.Endpoint()+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
			if err != nil {
				last = err.Error()
				continue
			}
			var st struct {
				Header struct {
					MemberID json.Number `json:"member_id"`
				} `json:"header"`
				Leader json.Number `json:"leader"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil {
				last = err.Error()
				continue
			}
			ids[st.Header.MemberID.String()] = i
			if st.Leader != "" && st.Leader != "0" {
				leader = st.Leader.String()
			}
		}
		if i, ok := ids[leader]; ok {
			return i
		}
		last = fmt.Sprintf("leader %q among members %v", leader, ids)
	}
	p.tb.Fatalf("etcdtest: no member knows the leader (%s)", last)
	return -1
}

// waitHealthy polls the member's /health until it says true: the member
// is up and the cluster has a leader.
func (m *Member) waitHealthy(timeout time.Duration) error {
	c := &http.Client{Timeout: testslack.Scale(time.Second)}
	deadline := time.Now().Add(testslack.Scale(timeout))
	var last string
	for time.Now().Before(deadline) {
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		select {
		case <-done:
			b, _ := os.ReadFile(m.Log)
			return fmt.Errorf("etcd member %s exited before it was healthy:\n%s", m.Name, lastLines(b, 20))
		default:
		}
		resp, err := c.Get(m.Endpoint() + "/health")
		if err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(b.String(), `"health":"true"`) {
				return nil
			}
			last = fmt.Sprintf("%s %s", resp.Status, strings.TrimSpace(b.String()))
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(m.Log)
	return fmt.Errorf("etcd member %s not healthy after %s (last answer: %s):\n%s", m.Name, timeout, last, lastLines(b, 20))
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
