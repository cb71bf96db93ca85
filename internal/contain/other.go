//go:build !linux

package contain

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// Off Linux there is neither a subreaper nor cgroups: the process group
// and the caller's own checks are all there is (see the package comment).

var errUnsupported = errors.New("not supported on this system")

func setSubreaper() error               { return errUnsupported }
func getpgrp() int                      { return syscall.Getpgrp() }
func intoCgroup(*exec.Cmd, int)         {}
func openDir(string) (int, error)       { return -1, errUnsupported }
func closeFD(int)                       {}
func cgroupRoot(string) (string, error) { return "", errUnsupported }
func cgroupPIDs(string) []int           { return nil }
func cgroupEmpty(string) bool           { return true }
func killCgroup(string, time.Duration)  {}
func removeCgroup(string)               {}
func readSmall(string) ([]byte, error)  { return nil, errUnsupported }
func writeRecord(string, string) error  { return nil }

// Match names the processes KillMatching kills.
type Match struct {
	Home string
	Loop string
}

// KillMatching finds nothing without /proc.
func KillMatching(Match) int { return 0 }

// KillStrays does nothing without the subreaper.
func (j *Jail) KillStrays(loop, worktree string) int { return 0 }

func (j *Jail) killRecordedStrays() int { return 0 }

// Run waits for ctx: there is nothing to reap.
func (j *Jail) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func startTime(int) uint64 { return 0 }

// processAlive polls with signal 0 off Linux (no start time to compare).
func processAlive(pid int, _ uint64) bool {
	return syscall.Kill(pid, 0) == nil
}

// guardKill has no /proc to find anything by: the process groups of the
// agents died with nothing to name them.
func guardKill(GuardOptions, uint64, bool) int { return 0 }

func uptimeTicks() uint64 { return 0 }
