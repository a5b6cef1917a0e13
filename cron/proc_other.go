//go:build !linux

package cron

import "syscall"

// actionProcAttr starts an exec action in its own process group.
func actionProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// reapExecution cannot verify a process group's owner without /proc; it
// does nothing (a run budget still bounds an orphaned group's life only
// while its herald lives).
func reapExecution(execID int64, pgid int) bool { return false }
