package runner

import (
	"fmt"
	"sync"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/sandbox"
)

// sandboxRun is the sandbox of one process run of an iteration (the agent,
// or its validation): the private home made, and for network allow the
// proxy listening.
type sandboxRun struct {
	it    *iteration
	proxy string // the proxy's socket directory; "" without one
	stop  func()
}

// startSandbox prepares the iteration's sandbox (Settings.Sandbox); nil
// when the profile has none. The caller ends it with end once the
// processes it wraps are gone.
func (it *iteration) startSandbox() (*sandboxRun, error) {
	p := it.s.Sandbox
	if !p.On() {
		return nil, nil
	}
	if _, err := p.PrepareHome(it.j.Loop.ID, sandbox.Getenv(it.env, "HOME")); err != nil {
		return nil, err
	}
	sb := &sandboxRun{it: it}
	if p.NetworkOrDefault() == "allow" {
		allow := p.AllowList(it.env)
		var mu sync.Mutex
		seen := map[string]bool{}
		px := &sandbox.Proxy{Allow: allow, Refused: func(target string) {
			it.log.Warn("sandbox proxy refused a connection: not in sandbox.allow_hosts", "target", target, "allow_hosts", allow)
			mu.Lock()
			first := !seen[target]
			seen[target] = true
			mu.Unlock()
			if first && it.r.OnRefused != nil {
				it.r.OnRefused(it.j.Loop.ID, it.j.Loop.Iteration, target)
			}
		}}
		dir, stop, err := px.Listen()
		if err != nil {
			return nil, err
		}
		sb.proxy, sb.stop = dir, stop
	}
	return sb, nil
}

// hiddenPrompt refuses, in a sandbox, a prompt template the sandbox hides
// from the agent (sandbox.Policy.Hides): reading it into the prompt would
// hand the agent the very file kept from it.
func (it *iteration) hiddenPrompt() error {
	for _, f := range []string{it.j.Settings.PromptFile, it.j.Settings.ResumePromptFile} {
		if it.s.Sandbox.Hides(f, it.env) {
			return fmt.Errorf("prompt template %s lies outside the repository, where the sandbox hides it from the agent: loopr does not read it into the prompt either; keep prompt templates in the repository or <home>/prompts", f)
		}
	}
	return nil
}

// wrap returns argv to run in the sandbox; argv itself without one.
func (sb *sandboxRun) wrap(argv []string) ([]string, error) {
	if sb == nil {
		return argv, nil
	}
	it := sb.it
	mw, mr := it.mcpBinds()
	out, err := it.s.Sandbox.Command(sandbox.Run{
		Loop: it.j.Loop.ID, Workdir: it.j.Workdir, Env: it.env, Proxy: sb.proxy,
		Writable: append(nonEmpty(it.res.Dir), mw...), // $LOOPR_ARTIFACT, $LOOPR_QUESTION_FILE; the MCP socket
		Readable: append([]string{it.j.ParentArtifact}, mr...),
	}, argv)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return out, nil
}

// wrapper is wrap as a Check's Wrap; nil without a sandbox.
func (sb *sandboxRun) wrapper() func([]string) ([]string, error) {
	if sb == nil {
		return nil
	}
	return sb.wrap
}

func (sb *sandboxRun) end() {
	if sb != nil && sb.stop != nil {
		sb.stop()
	}
}

func nonEmpty(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// CheckSandbox prepares, for commands that run loop l's code outside an
// iteration in dir (validate_in: clean runs the agent's tests again in a
// fresh checkout), the same sandbox as the loop's own validate: its
// profile's (s.Sandbox), dir read-write. wrap is for Check.Wrap, nil
// without a sandbox; end, always set, is called once the commands are gone.
func (r *Runner) CheckSandbox(s Settings, l loop.Loop, dir string, env []string) (wrap func([]string) ([]string, error), end func(), err error) {
	it := &iteration{r: r, j: Job{Loop: l, Workdir: dir, Settings: s}, s: s, env: env}
	it.log = r.logger().With("loop", l.ID, "iteration", l.Iteration)
	sb, err := it.startSandbox()
	if err != nil {
		return nil, func() {}, fmt.Errorf("sandbox: %w", err)
	}
	return sb.wrapper(), sb.end, nil
}
