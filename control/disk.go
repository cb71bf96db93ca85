package control

import (
	"fmt"
	"syscall"
)

// DiskFloorBytes is the free space below which the home's file system
// counts as full, whatever storage.disk_quota_min_gb says (0 included): no
// loop starts (reason disk_low) and the daemon refuses new loops with a
// clear error, because it could not write their records, prompts and logs.
// Work resumes by itself once space returns. An iteration writes at most
// a few MiB (logs are bounded to 4 MiB each); the store grows in steps.
const DiskFloorBytes = 16 << 20

// diskFloorGB is DiskFloorBytes in the unit of FreeGB.
const diskFloorGB = float64(DiskFloorBytes) / 1e9

// DiskFullError reports a home whose file system is below DiskFloorBytes.
// It wraps syscall.ENOSPC, so callers map it like a failed write.
type DiskFullError struct {
	Path   string
	FreeGB float64
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("disk full: %s on the file system of %s (loopr needs %d MiB to record and run loops); free some space and retry",
		freeText(e.FreeGB), e.Path, DiskFloorBytes>>20)
}

func (e *DiskFullError) Unwrap() error { return syscall.ENOSPC }

// freeText is a free-space figure in a unit that suits it.
func freeText(gb float64) string {
	if gb < 1 {
		return fmt.Sprintf("%.1f MiB free", gb*1e9/(1<<20))
	}
	return fmt.Sprintf("%.1f GB free", gb)
}

// DiskFull returns a *DiskFullError when the home's file system has less
// than DiskFloorBytes free, and nil otherwise (also when free space cannot
// be measured: the writes themselves will say).
func (s *Service) DiskFull() error {
	free, err := s.disk(s.Paths.Home)
	if err != nil || free >= diskFloorGB {
		return nil
	}
	return &DiskFullError{Path: s.Paths.Home, FreeGB: free}
}
