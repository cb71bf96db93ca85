// Package web is loopr's web dashboard: the tree of loops with live
// status, priority and cost, the NEEDS YOU inbox (answer a question;
// approve, iterate or reject a plan or a reviewed task; raise a budget), a
// loop's details, why it waits, its rendered agent output and its diff —
// for a phone on the same network or a browser on the machine.
//
// Pages are rendered on the server from html/template (every value is
// escaped); a few lines of JavaScript of our own follow the daemon's event
// stream over Server-Sent Events and swap in rows the server rendered, so
// the tree updates without a reload. Everything is embedded; there is no
// build step and no third-party script.
//
// The package talks to the daemon only through Backend, which
// client.Client implements: the daemon mounts Server.Handler on its TCP
// listener or on a loopback listener of its own (api.web, docs/web.md) and
// gives it a client of its own socket.
//
// Security: every page but the login needs the session cookie, which the
// token (api.token_file, or the one the daemon generates) or a one-time
// login link (LoginLink, `loopr web`) sets: HttpOnly, SameSite=Strict,
// derived from the token with HMAC so it dies with the token. Without it a
// request gets 401. Every action is a POST that carries a CSRF token
// (also derived from the token) or gets 403; a cross-origin Origin header
// gets 403 too. A Content-Security-Policy allows only the dashboard's own
// script and style.
package web
