package app

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestConfigShutdownDelay: PAYD_SHUTDOWN_DELAY defaults to 5s, takes 0 (no
// delay) and the flag over the variable, and a negative or malformed
// value is refused with an error naming the setting.
func TestConfigShutdownDelay(t *testing.T) {
	tests := []struct {
		env     string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{"", nil, 5 * time.Second, ""},
		{"0", nil, 0, ""},
		{"2s", nil, 2 * time.Second, ""},
		{"2s", []string{"-shutdown-delay", "750ms"}, 750 * time.Millisecond, ""},
		{"-1s", nil, 0, "negative"},
		{"soon", nil, 0, "not a duration"},
		{"", []string{"-shutdown-delay", "-5s"}, 0, "negative"},
	}
	for _, tt := range tests {
		getenv := func(k string) string {
			if k == "PAYD_SHUTDOWN_DELAY" {
				return tt.env
			}
			return ""
		}
		c, err := loadConfig("serve", tt.args, getenv, io.Discard)
		if tt.wantErr != "" {
			name := "PAYD_SHUTDOWN_DELAY" // the error names what was used: the variable, or the flag
			if tt.args != nil {
				name = "-shutdown-delay"
			}
			if err == nil || !strings.HasPrefix(err.Error(), name+":") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("PAYD_SHUTDOWN_DELAY=%q %v: loadConfig = %v, want an error naming %s (%s)", tt.env, tt.args, err, name, tt.wantErr)
			}
			continue
		}
		if err != nil || c.ShutdownDelay != tt.want {
			t.Errorf("PAYD_SHUTDOWN_DELAY=%q %v: ShutdownDelay = %v, %v, want %v", tt.env, tt.args, c.ShutdownDelay, err, tt.want)
		}
	}
	if f := FlagSet("serve").Lookup("shutdown-delay"); f == nil || f.DefValue != "5s" || !strings.Contains(f.Usage, "/readyz") {
		t.Errorf("payd serve -shutdown-delay = %+v, want a flag defaulting to 5s that names /readyz", f)
	}
	if FlagSet("sandbox").Lookup("shutdown-delay") != nil {
		t.Errorf("payd sandbox takes -shutdown-delay; only serve drains")
	}
}

// TestReadyWhileDraining: a draining payd is not ready, whatever its
// database says, and says why.
func TestReadyWhileDraining(t *testing.T) {
	var draining atomic.Bool
	draining.Store(true)
	if err := ready(context.Background(), nil, &draining); err == nil || err.Error() != "shutting down" {
		t.Errorf("ready(draining) = %v, want shutting down", err)
	}
}
