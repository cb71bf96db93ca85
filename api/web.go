package api

import "time"

// WebLogin is POST /v1/web/login: the web dashboard's address and a
// one-time login link to it (`loopr web`).
type WebLogin struct {
	URL       string    `json:"url"`        // the dashboard, e.g. http://127.0.0.1:41234/
	LoginURL  string    `json:"login_url"`  // signs a browser in once, until ExpiresAt
	ExpiresAt time.Time `json:"expires_at"` // when LoginURL stops working
}
