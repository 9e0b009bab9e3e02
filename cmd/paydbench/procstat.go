package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux that payd targets).
const clockTick = 10 * time.Millisecond

// cpuTime returns the CPU time (user plus system) process pid has used so
// far, from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(line string) (time.Duration, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	f := strings.Fields(line[end+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// peakRSS returns the peak resident set size of process pid in bytes
// (VmHWM in /proc/<pid>/status).
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseHWM(bufio.NewScanner(f))
}

// currentRSS returns the resident set size of process pid in bytes now
// (VmRSS in /proc/<pid>/status).
func currentRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusKB(bufio.NewScanner(f), "VmRSS")
}

// parseHWM finds the line "VmHWM:   12345 kB" and returns it in bytes.
func parseHWM(sc *bufio.Scanner) (int64, error) { return parseStatusKB(sc, "VmHWM") }

// parseStatusKB finds the line "field:   12345 kB" and returns it in bytes.
func parseStatusKB(sc *bufio.Scanner, field string) (int64, error) {
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: %s %q", field, rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc status: %w", err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("proc status: no %s line", field)
}

// loadAverage is the machine's 1, 5 and 15 minute load averages
// (/proc/loadavg), or "" where there is none: figures taken on a busy
// machine say less.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// findProcess returns the process ID of the first process under procDir
// whose command name (/proc/<pid>/comm) is one of names, or 0. A database
// server on another machine is not found: its CPU is not measured.
func findProcess(procDir string, names ...string) int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procDir, e.Name(), "comm"))
		if err != nil {
			continue
		}
		if slices.Contains(names, strings.TrimSpace(string(comm))) {
			return pid
		}
	}
	return 0
}
