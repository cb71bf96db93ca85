//go:build !linux

package safefile

// pseudoFS: outside Linux there is no /proc whose files pose as regular
// ones (macOS and the BSDs have none, or mount procfs without environ).
func pseudoFS(fd int) string { return "" }
