package app

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestComposeHealthchecks: payd and the sandbox are checked by payd
// itself in exec form (the image has no shell), each on loopback at the
// port it listens on; payd waits for a healthy sandbox; payd's stop grace
// period covers its shutdown delay and drain; and the file has no
// top-level name:, which Compose v1 refuses.
func TestComposeHealthchecks(t *testing.T) {
	c := loadCompose(t)
	final := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	var exe []string
	if entry := final[len(final)-1].find("ENTRYPOINT"); len(entry) != 1 || json.Unmarshal([]byte(entry[0]), &exe) != nil || len(exe) == 0 {
		t.Fatalf("Dockerfile ENTRYPOINT %v, want exec form", entry)
	}
	env := func(s composeService, k string) string { return interpolate(s.Environment[k], nil) }
	for name, listen := range map[string]string{"payd": env(c.Services["payd"], "PAYD_ADDR"), "sandbox": env(c.Services["sandbox"], "PAYD_SANDBOX_ADDR")} {
		hc := c.Services[name].Healthcheck
		if hc == nil {
			t.Errorf("service %s has no healthcheck", name)
			continue
		}
		// ["CMD", "/usr/local/bin/payd", "healthcheck", "-url", URL]
		if len(hc.Test) != 5 || hc.Test[0] != "CMD" || hc.Test[1] != exe[0] || hc.Test[2] != "healthcheck" || hc.Test[3] != "-url" {
			t.Errorf("service %s healthcheck test %q, want [CMD %s healthcheck -url URL] (exec form: no shell in the image)", name, hc.Test, exe[0])
			continue
		}
		u, err := url.Parse(hc.Test[4])
		_, port := hostPort(t, listen)
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() != port || u.Path != "/healthz" {
			t.Errorf("service %s healthcheck asks %q, want http://127.0.0.1:%s/healthz (where it listens)", name, hc.Test[4], port)
		}
		if d, err := time.ParseDuration(hc.Timeout); err != nil || d <= 2*time.Second {
			t.Errorf("service %s healthcheck timeout %q, want longer than payd healthcheck's own 2s", name, hc.Timeout)
		}
	}
	if got := c.Services["payd"].DependsOn["sandbox"].Condition; got != "service_healthy" {
		t.Errorf("payd depends on sandbox with %q, want service_healthy", got)
	}

	delay := env(c.Services["payd"], "PAYD_SHUTDOWN_DELAY")
	if delay == "" {
		delay = FlagSet("serve").Lookup("shutdown-delay").DefValue
	}
	d, err := time.ParseDuration(delay)
	if err != nil {
		t.Fatalf("payd PAYD_SHUTDOWN_DELAY %q: %v", delay, err)
	}
	grace, err := time.ParseDuration(c.Services["payd"].StopGracePeriod)
	if err != nil || grace < d+DrainTimeout {
		t.Errorf("payd stop_grace_period %q, want at least PAYD_SHUTDOWN_DELAY (%v) + %v of drain", c.Services["payd"].StopGracePeriod, d, DrainTimeout)
	}

	b, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"name", "version"} {
		if _, ok := top[key]; ok {
			t.Errorf("docker-compose.yml has a top-level %s:, which Compose v1 (name) or v2 (version) refuses or warns about", key)
		}
	}
}
