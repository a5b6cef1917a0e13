package cron

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// actionProcAttr starts an exec action in its own process group, and asks
// the kernel to SIGKILL the group's leader if herald dies first
// (PR_SET_PDEATHSIG, prctl(2)). Processes the leader started are reaped by
// boot recovery (reapExecution).
func actionProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// reapExecution kills process group pgid if, and only if, it still holds a
// process of execution execID — told by HERALD_EXECUTION_ID in its
// environment, read from /proc — so a reused group id is never touched. It
// reports whether it killed anything.
func reapExecution(execID int64, pgid int) bool {
	if pgid <= 1 {
		return false
	}
	want := []byte("HERALD_EXECUTION_ID=" + strconv.FormatInt(execID, 10) + "\x00")
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces, inside
		// parentheses): state ppid pgrp …
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(stat), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		return syscall.Kill(-pgid, syscall.SIGKILL) == nil
	}
	return false
}
