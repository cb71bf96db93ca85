package tui

import "github.com/loopr-dev/loopr/client"

// The daemon's typed client is the Client the dashboard runs on.
var _ Client = (*client.Client)(nil)
