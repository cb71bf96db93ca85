package config

import (
	"net"
	"strconv"
)

// api checks the `api:` section: listen is host:port, and a listener
// needs a token file. The file itself (present, private, not empty) is the
// daemon's to check when it starts.
func (v *checker) api(a API) {
	if a.Listen == "" {
		return
	}
	_, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		v.fail("api.listen", `want host:port, e.g. "127.0.0.1:7070" (%v)`, err)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail("api.listen", "port %q: want a number from 0 to 65535", port)
	}
	if a.TokenFile == "" {
		v.fail("api.token_file", "required with api.listen: every TCP request must carry the bearer token this file holds")
	}
}
