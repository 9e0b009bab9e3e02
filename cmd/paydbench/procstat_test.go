package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", "4242 (payd) S 1 4242 4242 0 -1 4194560 1220 0 0 0 150 37 0 0 20 0 9 0 12345 0 0", 1870 * time.Millisecond, false},
		{"name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0", 70 * time.Millisecond, false},
		{"no name", "7 R 1 7", 0, true},
		{"cut short", "7 (payd) S 1 7 7 0", 0, true},
		{"not a number", "7 (payd) S 1 7 7 0 -1 0 0 0 0 0 x 4 0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.line)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStat(%q) = %v, %v, want %v (error %t)", tt.line, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseHWM(t *testing.T) {
	status := "Name:\tpayd\nVmPeak:\t  900000 kB\nVmHWM:\t   30600 kB\nVmRSS:\t   29000 kB\n"
	got, err := parseHWM(bufio.NewScanner(strings.NewReader(status)))
	if err != nil || got != 30600<<10 {
		t.Errorf("parseHWM(status) = %d, %v, want %d", got, err, 30600<<10)
	}
	if _, err := parseHWM(bufio.NewScanner(strings.NewReader("Name:\tpayd\n"))); err == nil {
		t.Error("parseHWM(no VmHWM line) = nil error, want one")
	}
}

// TestOwnProcess reads this very process's figures, which must be there
// wherever /proc is.
func TestOwnProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Errorf("cpuTime(self) = %v", err)
	}
	if rss, err := peakRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("peakRSS(self) = %d, %v, want > 0", rss, err)
	}
}

func TestFindProcess(t *testing.T) {
	dir := t.TempDir()
	for pid, comm := range map[string]string{"12": "bash\n", "345": "mariadbd\n", "self": "mysqld\n", "7": "mysqld-helper\n"} {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "comm"), []byte(comm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := findProcess(dir, "mariadbd", "mysqld"); got != 345 {
		t.Errorf("findProcess = %d, want 345 (mariadbd; \"self\" is not a process ID, mysqld-helper is another program)", got)
	}
	if got := findProcess(dir, "postgres"); got != 0 {
		t.Errorf("findProcess(postgres) = %d, want 0", got)
	}
}
