package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// webConfig is needsConfig's daemon with the web dashboard on, plans
// waiting for approval and no webhook or notify command.
func webConfig(t *testing.T) string {
	t.Helper()
	agent, _ := json.Marshal([]string{"sh", abs(t, "testdata/needsagent.sh")})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 10
  max_api_calls: 8
agent:
  command: %s
  timeout_secs: 30
loops:
  plan: {require_approval: true}
  ralph: {max_iterations: 10, validate: []}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
api:
  web: true
`, agent)
}

// chromium finds the browser for the dashboard tests ($LOOPR_CHROMIUM,
// else chromium or chromium-browser on PATH). Without one the test is
// skipped, except under CI (.ci/run sets CI=true and installs chromium),
// where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOOPR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found on PATH: .ci/run installs it (apt-get install chromium); CI must run the web dashboard's browser test")
	}
	t.Skip("chromium not found on PATH (apt-get install chromium, or set LOOPR_CHROMIUM, to run this test)")
	return ""
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// TestWebDashboard drives the dashboard of a real daemon in headless
// Chromium, as a phone (375×812) and as a desk (1280 wide): it signs in
// with the one-time link `loopr web` prints; answers a question in two
// taps (the answer box, the send button) and the loop's next prompt holds
// the answer within 2 s of the second; approves a plan from the inbox; and
// watches a loop added meanwhile appear in the tree and run to complete
// without a reload. Screenshots go to the test's artifact directory, and
// with -update-docs to docs/img (the README shows them).
func TestWebDashboard(t *testing.T) {
	t.Parallel()
	chrome := chromium(t)
	r := newRepo(t, webConfig(t))
	d := startDaemon(t, r)
	add := func(typ, title string) loop.Loop {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", typ, "--title", title, "--task", "behave: "+title, "--json"), &l)
		return l
	}
	ask := add(loop.Ralph, "ask which port")
	plan := add(loop.Plan, "a plan to approve")
	waitEvery(t, 90*time.Second, slowPoll, "the question and the plan awaiting approval", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		st := status(t, r)
		return len(st.NeedsYou) == 1 && len(st.AwaitingApproval) == 1
	})

	var link api.WebLogin
	mustJSON(t, ok(t, r.dir, "web", "--json"), &link)
	if !strings.HasPrefix(link.URL, "http://127.0.0.1:") || !strings.HasPrefix(link.LoginURL, link.URL+"login?code=") {
		t.Fatalf("loopr web --json: %+v; want a loopback URL and a login link under it", link)
	}
	qr := ok(t, r.dir, "web")
	if !strings.Contains(qr, link.URL) || !strings.Contains(qr, "▀") || !strings.Contains(ok(t, r.dir, "web", "--no-qr"), "login?code=") {
		t.Errorf("loopr web: want the URL, a new link and a half-block QR code:\n%s", qr)
	}

	ctx := browser(t, chrome)
	run := func(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			t.Fatalf("%s: %v\ndaemon log:\n%s", what, err, tail(d.output(), 30))
		}
	}
	get := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		v, err := chromedp.Run(c, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shots := t.ArtifactDir()
	shot := func(name string) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
		if err != nil || len(png) == 0 {
			t.Fatalf("screenshot %s: %v (%d bytes)", name, err, len(png))
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if *updateDocs {
			if err := os.WriteFile(filepath.Join("..", "docs", "img", name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The phone: sign in by the link, then the page is live.
	run("open the login link at 375×812", time.Minute,
		chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2)),
		chromedp.Navigate(link.LoginURL),
		chromedp.WaitVisible(css(`#need-`+ask.ID)),
		chromedp.WaitVisible(css(`#live.on`)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[string](`window.loaded = "no reload"`)(ctx, tg)
			return err
		}),
	)
	shot("web-375.png")
	if w := get("the page's width", chromedp.Evaluate[string](`String(document.documentElement.scrollWidth)`)); w != "375" {
		t.Errorf("at 375 px the page is %s px wide; want no horizontal scrolling", w)
	}
	question := get("read the question", chromedp.Text(css(`#need-`+ask.ID+` .detail`)))
	if !strings.Contains(question, "Which port should the server listen on?") {
		t.Errorf("the inbox shows %q; want the agent's question", question)
	}

	// Tap 1: the answer box; type; tap 2: send.
	const answer = "Use port 9191, please."
	taps := 0
	tap := func(sel string) chromedp.Action[chromedp.Void] {
		taps++
		return chromedp.Tap(css(sel))
	}
	run("tap the answer box and type", time.Minute, tap(`#ans-`+ask.ID), chromedp.KeyEvent(answer))
	sent := time.Now()
	run("tap send", time.Minute, tap(`#need-`+ask.ID+` button.primary`))
	var took time.Duration
	waitFor(t, 60*time.Second, "the answer in the loop's next prompt", func() bool {
		took = time.Since(sent)
		return strings.Contains(iterFile(r, ask.ID, 1, "prompt.md"), answer)
	})
	t.Logf("answered in %d taps; the next prompt held the answer %v after the tap", taps, took.Round(time.Millisecond))
	if taps > 3 || took > 2*time.Second {
		t.Errorf("answered in %d taps, prompt after %v; want ≤ 3 taps and ≤ 2 s", taps, took)
	}

	// Approve the plan from the inbox (back on the dashboard after the answer).
	run("approve the plan", time.Minute,
		chromedp.WaitVisible(css(`#approve-`+plan.ID+` button.primary`)),
		chromedp.Tap(css(`#approve-`+plan.ID+` button.primary`)),
		chromedp.WaitNotPresent(css(`#approve-`+plan.ID)),
	)
	var tree string
	waitEvery(t, 90*time.Second, slowPoll, "the approved plan complete, its spec created", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		loops := list(t, r)
		if now := describe(loops); now != tree { // the log shows how the tree went
			tree = now
			t.Logf("tree:\n%s", tree)
		}
		p := show(t, r, plan.ID)
		if p.Status == loop.AwaitingApproval {
			t.Fatalf("the plan still awaits approval after the tap on Approve:\n%s", tree)
		}
		return p.Status == loop.Complete && slices.ContainsFunc(loops, func(l loop.Loop) bool { return l.Parent == plan.ID })
	})

	// The live tree: a loop added now appears and completes with no reload.
	run("open the dashboard again", time.Minute, chromedp.Navigate(link.URL), chromedp.WaitVisible(css(`#live.on`)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[string](`window.loaded = "no reload"`)(ctx, tg)
			return err
		}))
	live := add(loop.Ralph, "arrives live")
	run("the new loop's row reaches complete without a reload", 90*time.Second,
		chromedp.WaitVisible(css(`#row-`+live.ID)),
		chromedp.WaitVisible(css(`#row-`+live.ID+`[data-status="complete"]`)))
	mark := get("read the marker", chromedp.Evaluate[string](`window.loaded || "reloaded"`))
	if mark != "no reload" {
		t.Errorf("the page reloaded (marker %q); want live updates only", mark)
	}
	shot2 := add(loop.Ralph, "ask what colour") // something in the inbox for the desk's screenshot
	run("the desk at 1280", time.Minute,
		chromedp.EmulateViewport(1280, 860),
		chromedp.WaitVisible(css(`#need-`+shot2.ID)))
	shot("web-1280.png")
}

// TestWebOpenBindRefusedAtStart: `loopr daemon` refuses to start with
// the dashboard on an address beyond loopback and no api.token_file, and
// `loopr web` on a daemon whose dashboard is off says how to turn it on.
func TestWebOpenBindRefusedAtStart(t *testing.T) {
	t.Parallel()
	r := newRepo(t, "api:\n  web: true\n  web_listen: \"0.0.0.0:0\"\nstorage:\n  disk_quota_min_gb: 0\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "daemon")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "api.web_listen") || !strings.Contains(string(out), "not a loopback address") {
		t.Errorf("loopr daemon with web_listen 0.0.0.0 and no token: %v\n%s\nwant a refusal at start naming api.web_listen", err, out)
	}

	off := newRepo(t, "storage:\n  disk_quota_min_gb: 0\n")
	startDaemon(t, off)
	res := run(t, off.dir, "", "web")
	if res.code == 0 || !strings.Contains(res.stderr, "api.web: true") {
		t.Errorf("loopr web with the dashboard off: exit %d, %q; want an error naming api.web: true", res.code, res.stderr)
	}
}
