package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestSecuritySocket: the socket is mode 0600 in a 0700 home. As root, it
// also opens both up (as a careless chmod would) and connects as another
// user (nobody): SO_PEERCRED drops the connection before a byte is read,
// the client fails, and the daemon logs the refusal with the peer's uid.
func TestSecuritySocket(t *testing.T) {
	t.Parallel()
	e := newRelEnv(t, relSimpleConfig([]string{"true"}, ""))
	d := e.start()
	home, err := os.Stat(e.home)
	if err != nil {
		t.Fatal(err)
	}
	sock, err := os.Stat(filepath.Join(e.home, "loopr.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if home.Mode().Perm() != 0o700 || sock.Mode()&fs.ModeSocket == 0 || sock.Mode().Perm() != 0o600 {
		t.Errorf("home %v, socket %v; want a 0700 home and a 0600 socket", home.Mode(), sock.Mode())
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped the other-uid connection: switching to another user needs root (CI runs as root)")
	}
	// A loopr binary and a working directory the other user can use.
	pub, err := os.MkdirTemp("", "loopr-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	os.Chmod(pub, 0o755)
	peerBin := filepath.Join(pub, "loopr")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(peerBin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// The careless chmod: the test's directories, the home and the socket
	// open to everyone, so only SO_PEERCRED stands in the way.
	for _, dir := range []string{filepath.Dir(e.dir), e.dir, e.home} {
		os.Chmod(dir, 0o755)
	}
	os.Chmod(filepath.Join(e.home, "loopr.sock"), 0o666)
	cmd := exec.Command(peerBin, "--home", e.home, "status", "--json")
	cmd.Dir = pub
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + pub}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("loopr status as uid 65534 succeeded:\n%s", out)
	}
	t.Logf("loopr status as uid 65534: %v: %s", err, strings.TrimSpace(string(out)))
	relWaitFor(t, 5*time.Second, "the refusal in the daemon log", func() bool {
		return strings.Contains(e.output(), `msg="refused connection from another user" peer_uid=65534`)
	})
	if st := d.status(t); !st.Daemon {
		t.Error("the daemon stopped serving its own user")
	}
}

// relTCPAddr waits for the daemon to log the address of its TCP listener.
func relTCPAddr(t *testing.T, e *relEnv) string {
	t.Helper()
	re := regexp.MustCompile(`msg="api listening" tcp=(\S+)`)
	var addr string
	relWaitFor(t, 5*time.Second, "the TCP listener in the log", func() bool {
		if m := re.FindStringSubmatch(e.output()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// TestSecurityTCPBearer: with api.listen set, the API also answers on TCP,
// but only to requests carrying the token of api.token_file; others get a
// 401 JSON error. A token file other users can read stops the daemon at
// start with a clear message.
func TestSecurityTCPBearer(t *testing.T) {
	t.Parallel()
	token := "4f1c0d6e3b2a99e8c7d6b5a4f3e2d1c0"
	e := newRelEnv(t, relSimpleConfig([]string{"true"}, `api:
  listen: "127.0.0.1:0"
  token_file: api-token
`))
	tokenFile := filepath.Join(e.dir, "api-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.start()
	base := "http://" + relTCPAddr(t, e)
	do := func(method, path, auth, body string) (int, []byte, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	for _, tc := range []struct{ name, auth string }{
		{"no token", ""},
		{"wrong token", "Bearer " + strings.Repeat("0", len(token))},
		{"token prefix", "Bearer " + token[:8]},
		{"basic auth", "Basic " + token},
	} {
		for _, r := range [][2]string{{"GET", "/v1/status"}, {"GET", "/v1/loops"}, {"POST", "/v1/loops"}, {"GET", "/v1/export"}, {"GET", "/metrics"}, {"GET", "/nope"}} {
			code, body, h := do(r[0], r[1], tc.auth, `{"type":"ralph","task":"sneak in"}`)
			var e api.Error
			if code != 401 || json.Unmarshal(body, &e) != nil || e.Err.Code != api.CodeUnauthorized || h.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: %s %s = %d %q; want 401 unauthorized JSON", tc.name, r[0], r[1], code, body)
			}
		}
	}
	code, body, _ := do("GET", "/v1/status", "Bearer "+token, "")
	var st api.Status
	if code != 200 || json.Unmarshal(body, &st) != nil || !st.Daemon {
		t.Fatalf("with the token: %d %q", code, body)
	}
	code, body, _ = do("POST", "/v1/loops", "Bearer "+token, `{"type":"ralph","task":"over tcp"}`)
	if code != 201 {
		t.Fatalf("create with the token: %d %q", code, body)
	}
	if loops, err := d.c.List(context.Background(), api.ListRequest{}); err != nil || len(loops) != 1 {
		t.Errorf("the socket needs no token: %d loops, %v", len(loops), err)
	}
	if log := e.output(); !strings.Contains(log, "refused API request without the bearer token") || strings.Contains(log, token) {
		t.Error("the daemon log should record refusals and never the token")
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit %d", code)
	}

	// A token file other users can read: refused at start.
	os.Chmod(tokenFile, 0o644)
	r := run(t, e.dir, "", "daemon")
	want := "api.token_file " + tokenFile + ": mode 0644 lets other users read or change the token; run chmod 600 " + tokenFile
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("daemon with a world-readable token file: exit %d, stderr %q; want exit 1 with %q", r.code, r.stderr, want)
	}
	t.Logf("world-readable token file: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
}

// TestSecuritySecretsNeverLeak runs a tree with ANTHROPIC_API_KEY in the
// daemon's environment, at log level debug. Every agent receives the key
// (it writes the key's SHA-256), yet the key appears nowhere loopr writes
// or answers: the daemon log, any file under the home (the store file
// byte for byte, prompts, agent and validation logs, artifacts), the
// export, and every API answer (status, list, each loop, why, scheduler,
// output, stats, metrics, the event stream).
func TestSecuritySecretsNeverLeak(t *testing.T) {
	t.Parallel()
	secret := fmt.Sprintf("sk-secret-xyz-%d", time.Now().UnixNano())
	sum := sha256.Sum256([]byte(secret))
	wantSum := hex.EncodeToString(sum[:])
	outDir := t.TempDir()
	e := newRelEnv(t, relSimpleConfig([]string{"sh", abs(t, "testdata/secretagent.sh"), outDir}, ""))
	e.env = append(e.env, "ANTHROPIC_API_KEY="+secret)
	d := e.start("--log-level", "debug")
	ctx := context.Background()
	if _, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Task: "Keep secrets secret."}); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 30*time.Second, "the tree to complete", func() bool {
		st := d.status(t)
		return st.Counts[loop.Complete] == 4 && st.Counts[loop.Pending]+st.Counts[loop.Running] == 0
	})
	loops, err := d.c.List(ctx, api.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The agents got the key.
	for _, l := range loops {
		got, err := os.ReadFile(filepath.Join(outDir, l.ID))
		if err != nil || strings.TrimSpace(string(got)) != wantSum {
			t.Errorf("agent of loop %s did not receive ANTHROPIC_API_KEY (sha256 %q, %v)", l.ID, got, err)
		}
	}

	var answers []string
	hc := relSocketClient(filepath.Join(e.home, "loopr.sock"))
	defer hc.CloseIdleConnections()
	get := func(path string) {
		resp, err := hc.Get("http://loopr" + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answers = append(answers, "GET "+path+": "+string(b))
	}
	for _, p := range []string{"/v1/status", "/v1/loops", "/v1/scheduler", "/v1/stats", "/metrics", "/v1/export"} {
		get(p)
	}
	for _, l := range loops {
		for _, p := range []string{"/v1/loops/" + l.ID, "/v1/loops/" + l.ID + "/why", "/v1/loops/" + l.ID + "/output"} {
			get(p)
		}
	}
	answers = append(answers, relFirstStreamLines(t, hc, 3))
	answers = append(answers, ok(t, e.dir, "export"), ok(t, e.dir, "status", "--json"), ok(t, e.dir, "list", "--json"))
	for _, a := range answers {
		if strings.Contains(a, secret) {
			t.Errorf("the key appears in an API answer: %.200s", a)
		}
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit %d", code)
	}
	answers = append(answers, ok(t, e.dir, "export")) // through the store directly

	if strings.Contains(e.output(), secret) {
		t.Error("the key appears in the daemon log")
	}
	files := 0
	filepath.WalkDir(e.home, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || de.Type()&fs.ModeSocket != 0 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		files++
		if strings.Contains(string(b), secret) {
			t.Errorf("the key appears in %s", p)
		}
		return nil
	})
	if !strings.Contains(strings.Join(answers, "\n"), wantSum) {
		t.Error("the agent's output (with the key's hash) is not where the test looked: the search proves nothing")
	}
	t.Logf("%d loops' agents received the key; not found in the daemon log (debug), %d files under the home (store included), %d API answers and exports", len(loops), files, len(answers))
}

// relSocketClient is a plain HTTP client over a daemon's socket.
func relSocketClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// relFirstStreamLines reads the first n lines of the event stream.
func relFirstStreamLines(t *testing.T, hc *http.Client, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(5*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://loopr/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for i := 0; i < n && sc.Scan(); i++ {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}
