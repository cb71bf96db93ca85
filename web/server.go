package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// Backend is what the dashboard needs of the daemon; client.Client
// implements it.
type Backend interface {
	Status(ctx context.Context) (api.Status, error)
	List(ctx context.Context, req api.ListRequest) ([]loop.Loop, error)
	Get(ctx context.Context, id string) (loop.Loop, error)
	Why(ctx context.Context, id string, now time.Time) (api.Why, error)
	Diff(ctx context.Context, id string) (api.Diff, error)
	Output(ctx context.Context, id string, maxBytes int) (string, error)
	Act(ctx context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error)
	SetBudget(ctx context.Context, id string, req api.BudgetRequest) (api.BudgetResult, error)
	Scheduler(ctx context.Context, now time.Time) (api.SchedulerView, error)
	Events(ctx context.Context) (<-chan api.StreamMsg, error)
}

// MinTokenLen is the shortest token the dashboard accepts.
const MinTokenLen = 16

// Cookie names and lifetimes.
const (
	sessionCookie = "loopr_session"
	sessionMaxAge = 30 * 24 * time.Hour
	maxSessions   = 64 // signed-in browsers at once
	// LoginLinkTTL is how long a one-time login link works.
	LoginLinkTTL = 10 * time.Minute
	maxLinks     = 64 // one-time codes held at once; the oldest goes first
)

// Options configure a Server.
type Options struct {
	// Token is the secret a person enters once (or that a login link
	// stands for); at least MinTokenLen bytes.
	Token []byte
	// Dial returns the backend; it is called on the first request that
	// needs it and again after it failed.
	Dial func(ctx context.Context) (Backend, error)
	Log  *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Server is the dashboard. Its handler is safe for concurrent use.
type Server struct {
	o     Options
	csrf  string // the forms' token: HMAC(token, "csrf")
	pages map[string]*template.Template
	frags *template.Template

	mu    sync.Mutex
	be    Backend
	links map[string]time.Time // one-time login codes → expiry
	// sessions are the signed-in browsers: a random id each (the cookie's
	// value) → expiry. Sign out ends one; they live in the daemon's
	// memory, so a restart of the daemon signs every browser out.
	sessions map[string]time.Time
	prio     prioCache

	refused refusals // wrong tokens, logged at most once a second
}

// refusals counts refused logins between two log lines: a flood of wrong
// tokens must not fill the disk with the daemon's log.
type refusals struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// log logs one refused login, or counts it when one was logged less than
// a second ago.
func (f *refusals) log(log *slog.Logger, now time.Time, remote string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.last) < time.Second {
		f.suppressed++
		return
	}
	log.Warn("web: refused a login with a wrong token", "remote", remote, "more_refused", f.suppressed)
	f.last, f.suppressed = now, 0
}

//go:embed assets
var assets embed.FS

// New checks o and parses the templates.
func New(o Options) (*Server, error) {
	if len(o.Token) < MinTokenLen {
		return nil, fmt.Errorf("web: token too short (%d bytes, want at least %d)", len(o.Token), MinTokenLen)
	}
	if o.Dial == nil {
		return nil, errors.New("web: no backend")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, csrf: mac(o.Token, "csrf"), links: map[string]time.Time{}, sessions: map[string]time.Time{}}
	if err := s.parse(); err != nil {
		return nil, err
	}
	return s, nil
}

func mac(key []byte, what string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("loopr web " + what))
	return hex.EncodeToString(h.Sum(nil))
}

// parse builds one template set per page (layout + page + fragments) and
// the fragments alone, for the event stream.
func (s *Server) parse() error {
	fm := template.FuncMap{"csrf": func() string { return s.csrf }}
	for k, v := range funcs {
		fm[k] = v
	}
	base, err := template.New("").Funcs(fm).ParseFS(assets, "assets/frag.html", "assets/layout.html")
	if err != nil {
		return fmt.Errorf("web: templates: %w", err)
	}
	s.frags = base
	s.pages = map[string]*template.Template{}
	for _, p := range []string{"index", "loop", "login", "error"} {
		t, err := template.Must(base.Clone()).ParseFS(assets, "assets/"+p+".html")
		if err != nil {
			return fmt.Errorf("web: template %s: %w", p, err)
		}
		s.pages[p] = t
	}
	return nil
}

// backend returns the backend, dialling it when there is none yet.
func (s *Server) backend(ctx context.Context) (Backend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.be != nil {
		return s.be, nil
	}
	be, err := s.o.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("reach the daemon: %w", err)
	}
	s.be = be
	return be, nil
}

// LoginLink returns a one-time login link under base (the dashboard's
// URL, e.g. http://127.0.0.1:7070/) and when it stops working.
func (s *Server) LoginLink(base string) (string, time.Time) {
	now := s.o.Now()
	exp := now.Add(LoginLinkTTL)
	s.mu.Lock()
	code := issue(s.links, 24, now, exp, maxLinks)
	s.mu.Unlock()
	u, err := url.Parse(base)
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	u = u.JoinPath("login")
	u.RawQuery = url.Values{"code": {code}}.Encode()
	return u.String(), exp
}

// issue adds a new random secret of n bytes (hex) expiring at exp to m,
// the one-time links or the sessions, and returns it: what expired by now
// goes first, then, while m holds max, the one that expires soonest. The
// caller holds s.mu.
func issue(m map[string]time.Time, n int, now, exp time.Time, max int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	secret := hex.EncodeToString(b)
	for k, e := range m {
		if !now.Before(e) {
			delete(m, k)
		}
	}
	for len(m) >= max {
		var first string
		for k, e := range m {
			if first == "" || e.Before(m[first]) {
				first = k
			}
		}
		delete(m, first)
	}
	m[secret] = exp
	return secret
}

// useCode consumes a one-time code; false when unknown, used or expired.
func (s *Server) useCode(code string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.links[code]
	delete(s.links, code)
	return ok && s.o.Now().Before(exp)
}

// Handler is the dashboard's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", cacheFor(http.FileServerFS(static))))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.Handle("GET /{$}", s.authed(s.index))
	mux.Handle("GET /loop/{id}", s.authed(s.loopPage))
	mux.Handle("GET /events", s.authed(s.events))
	mux.Handle("POST /loop/{id}/budget", s.authed(s.posted(s.budget)))
	mux.Handle("POST /loop/{id}/{action}", s.authed(s.posted(s.act)))
	mux.Handle("POST /logout", s.authed(s.posted(s.logout)))
	return headers(mux)
}

// headers sets the security headers of every answer.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// signedIn reports whether r carries the cookie of a live session.
func (s *Server) signedIn(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.sessions[c.Value]
	return ok && s.o.Now().Before(exp)
}

// startSession signs a browser in: a new random session id as its cookie.
// At most maxSessions live at once; the one that ends soonest makes room.
func (s *Server) startSession(w http.ResponseWriter) {
	now := s.o.Now()
	s.mu.Lock()
	id := issue(s.sessions, 32, now, now.Add(sessionMaxAge), maxSessions)
	s.mu.Unlock()
	s.setSession(w, id, sessionMaxAge)
}

// endSession signs r's browser out: its session stops working at once,
// wherever its cookie went.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	s.setSession(w, "", -time.Second)
}

// authed serves h to signed-in requests; others get 401 and the login form.
func (s *Server) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.signedIn(r) {
			next := "/" // after signing in: back to the page asked for, never to a stream or an action
			if r.Method == http.MethodGet && r.URL.Path != "/events" {
				next = safeBack(r.URL.RequestURI())
			}
			s.render(w, http.StatusUnauthorized, "login", loginView{Next: next})
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	})
}

// posted checks an action's CSRF token and origin: 403 without them.
func (s *Server) posted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				s.fail(w, http.StatusForbidden, "cross-origin request refused: use the dashboard's own page")
				return
			}
		}
		got := r.PostFormValue("csrf")
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			s.fail(w, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
			return
		}
		h(w, r)
	}
}

func (s *Server) setSession(w http.ResponseWriter, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(maxAge / time.Second)})
}

type loginView struct {
	Next  string
	Error string
	Done  bool // signed in by a link: continue to Next
}

// loginPage is the login form, or with ?code= a one-time link: the
// session is set and a page sends the browser on (a same-site
// navigation, so the SameSite=Strict cookie goes with it).
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	if code == "" {
		s.render(w, http.StatusOK, "login", loginView{Next: "/"})
		return
	}
	if !s.useCode(code) {
		s.render(w, http.StatusUnauthorized, "login", loginView{Next: "/", Error: "This login link was used already or has expired: run loopr web for a new one, or enter the token."})
		return
	}
	s.startSession(w)
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, http.StatusOK, "login", loginView{Next: "/", Done: true})
}

// login takes the token from the form.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	tok := r.PostFormValue("token")
	next := safeBack(r.PostFormValue("next"))
	a, b := sha256.Sum256([]byte(tok)), sha256.Sum256(s.o.Token)
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		s.refused.log(s.o.Log, s.o.Now(), r.RemoteAddr)
		s.render(w, http.StatusUnauthorized, "login", loginView{Next: next, Error: "Wrong token."})
		return
	}
	s.startSession(w)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.endSession(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeBack is p when it is a path of this site, else "/". A browser
// drops tabs and line breaks from a Location ("/\t/x" is "//x", another
// site), so a p with a control character is refused too.
func safeBack(p string) string {
	if len(p) == 0 || p[0] != '/' || len(p) > 1 && (p[1] == '/' || p[1] == '\\') || strings.ContainsFunc(p, unicode.IsControl) {
		return "/"
	}
	return p
}

// errorView is an error page.
type errorView struct {
	Status  int
	Message string
}

func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, status, "error", errorView{Status: status, Message: msg})
}

// render executes page with data, answering status.
func (s *Server) render(w http.ResponseWriter, status int, page string, data any) {
	t := s.pages[page]
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout", pageData{Page: page, SignedIn: page != "login", Data: data}); err != nil {
		s.o.Log.Warn("web: render", "page", page, "err", err)
	}
}

// pageData is what every page's template gets.
type pageData struct {
	Page     string
	SignedIn bool // the page shows the CSRF token and the live stream
	Data     any
}
