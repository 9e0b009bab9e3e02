package app

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/payd/payd/telemetry"
)

// No Docker engine runs where payd is developed, so docker-compose.yml and
// the Dockerfile are kept honest by reading them against payd's own
// configuration here.

const repoRoot = ".."

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test    []string `yaml:"test"`
		Timeout string   `yaml:"timeout"`
	} `yaml:"healthcheck"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("yaml.Unmarshal(docker-compose.yml) = %v", err)
	}
	for _, name := range []string{"mysql", "payd", "sandbox"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("docker-compose.yml has no service %q", name)
		}
	}
	return c
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*)|:\?[^}]*)?\}`)

// interpolate expands ${VAR} and ${VAR:-default} as compose does, from vars.
func interpolate(s string, vars map[string]string) string {
	s = composeVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := composeVar.FindStringSubmatch(m)
		if v := vars[sub[1]]; v != "" {
			return v
		}
		return sub[2]
	})
	return strings.ReplaceAll(s, "$$", "$")
}

// serviceEnv is a service's environment after interpolation, as a getenv.
func serviceEnv(s composeService, vars map[string]string) func(string) string {
	env := map[string]string{}
	for k, v := range s.Environment {
		env[k] = interpolate(v, vars)
	}
	return func(k string) string { return env[k] }
}

// TestComposeSetsOnlyKnownSettings: every variable compose hands payd is
// one payd reads (a typo would be silently ignored and a default used).
func TestComposeSetsOnlyKnownSettings(t *testing.T) {
	c := loadCompose(t)
	known := map[string]bool{}
	for _, sub := range []string{"serve", "sandbox"} {
		for _, s := range (&Config{}).settings(sub) {
			known[s.env] = true
		}
	}
	for _, name := range telemetry.TracingVariables {
		known[name] = true
	}
	for _, name := range []string{"payd", "sandbox"} {
		for k := range c.Services[name].Environment {
			if !known[k] {
				t.Errorf("service %s sets %s, which payd does not read", name, k)
			}
		}
	}
}

// hostPort splits a URL's or listen address's host and port.
func hostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q has no host:port: %v", addr, err)
	}
	return h, p
}

// TestComposeWiring: the services find each other where they listen, start
// in a workable order, and share what they must share.
func TestComposeWiring(t *testing.T) {
	c := loadCompose(t)
	mysql, payd, sb := c.Services["mysql"], c.Services["payd"], c.Services["sandbox"]
	// Values as compose would pass them, with a password that needs no escaping.
	env := func(s composeService, k string) string {
		return interpolate(s.Environment[k], map[string]string{"MYSQL_PASSWORD": "Pw4compose"})
	}

	for name, s := range c.Services {
		for dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which is not a service", name, dep)
			}
		}
		for _, v := range s.Volumes {
			if vol, _, _ := strings.Cut(v, ":"); !strings.HasPrefix(vol, ".") && !strings.HasPrefix(vol, "/") {
				if _, ok := c.Volumes[vol]; !ok {
					t.Errorf("service %s mounts volume %s, which is not declared", name, vol)
				}
			}
		}
	}
	// payd -> MySQL: the database the image creates, its user, its password.
	db, err := url.Parse(env(payd, "PAYD_DATABASE_URL"))
	if err != nil || db.Scheme != "mysql" || db.Hostname() != "mysql" || db.Port() != "3306" {
		t.Errorf("payd PAYD_DATABASE_URL = %q, want mysql://...@mysql:3306/...", env(payd, "PAYD_DATABASE_URL"))
	} else {
		pass, _ := db.User.Password()
		if db.User.Username() != env(mysql, "MYSQL_USER") || pass != env(mysql, "MYSQL_PASSWORD") || db.Path != "/"+env(mysql, "MYSQL_DATABASE") {
			t.Errorf("payd connects as %s to %s, want MYSQL_USER %s with MYSQL_PASSWORD to %s",
				db.User.Username(), db.Path, env(mysql, "MYSQL_USER"), env(mysql, "MYSQL_DATABASE"))
		}
	}
	if mysql.Healthcheck == nil || len(mysql.Healthcheck.Test) == 0 {
		t.Errorf("mysql has no healthcheck")
	}
	if payd.DependsOn["mysql"].Condition != "service_healthy" {
		t.Errorf("payd depends on mysql with %q, want service_healthy (migrations run at start)", payd.DependsOn["mysql"].Condition)
	}
	if _, ok := payd.DependsOn["sandbox"]; !ok {
		t.Errorf("payd does not depend on sandbox, its provider")
	}
	// payd -> sandbox, sandbox -> payd: each calls the other where it listens.
	checkCall(t, "payd PAYD_PROVIDER_URL", env(payd, "PAYD_PROVIDER_URL"), "sandbox", env(sb, "PAYD_SANDBOX_ADDR"), "")
	checkCall(t, "sandbox PAYD_SANDBOX_WEBHOOK_URL", env(sb, "PAYD_SANDBOX_WEBHOOK_URL"), "payd", env(payd, "PAYD_ADDR"), "/v1/webhooks/provider")
	if env(payd, "PAYD_WEBHOOK_SECRET") == "" || env(payd, "PAYD_WEBHOOK_SECRET") != env(sb, "PAYD_WEBHOOK_SECRET") {
		t.Errorf("PAYD_WEBHOOK_SECRET differs between payd (%q) and sandbox (%q): every webhook would be refused",
			env(payd, "PAYD_WEBHOOK_SECRET"), env(sb, "PAYD_WEBHOOK_SECRET"))
	}
	if env(payd, "PAYD_ENV") != "production" {
		t.Errorf("payd PAYD_ENV = %q, want production", env(payd, "PAYD_ENV"))
	}
	// Published ports reach the listeners.
	checkPublished(t, "payd", payd, env(payd, "PAYD_ADDR"))
	checkPublished(t, "sandbox", sb, env(sb, "PAYD_SANDBOX_ADDR"))
	// The sandbox's SQLite file lies on a volume, so it survives a restart.
	dbPath, ok := strings.CutPrefix(env(sb, "PAYD_SANDBOX_DATABASE_URL"), "sqlite://")
	if !ok || !onVolume(sb, dbPath) {
		t.Errorf("sandbox PAYD_SANDBOX_DATABASE_URL = %q, want sqlite:// on a mounted volume %v", env(sb, "PAYD_SANDBOX_DATABASE_URL"), sb.Volumes)
	}
	if got := strings.Join(payd.Command, " "); got != "serve" {
		t.Errorf("payd command = %q, want serve", got)
	}
	if got := strings.Join(sb.Command, " "); got != "sandbox" {
		t.Errorf("sandbox command = %q, want sandbox", got)
	}
}

// checkCall: url names service and the port it listens on (on every interface).
func checkCall(t *testing.T, what, rawURL, service, listen, path string) {
	t.Helper()
	host, port := hostPort(t, rawURL)
	lhost, lport := hostPort(t, listen)
	if host != service || port != lport {
		t.Errorf("%s = %q, want %s:%s (where it listens)", what, rawURL, service, lport)
	}
	if lhost != "0.0.0.0" && lhost != "" {
		t.Errorf("%s listens on %q: other containers cannot reach it, want 0.0.0.0", service, listen)
	}
	if u, _ := url.Parse(rawURL); u.Path != path {
		t.Errorf("%s path = %q, want %q", what, u.Path, path)
	}
}

func checkPublished(t *testing.T, name string, s composeService, listen string) {
	t.Helper()
	_, lport := hostPort(t, listen)
	for _, p := range s.Ports {
		if i := strings.LastIndex(p, ":"); i >= 0 && p[i+1:] == lport {
			return
		}
	}
	t.Errorf("service %s publishes %v, want its listening port %s", name, s.Ports, lport)
}

func onVolume(s composeService, path string) bool {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && strings.HasPrefix(path, strings.TrimSuffix(parts[1], "/")+"/") {
			return true
		}
	}
	return false
}

// readEnvFile reads KEY=VALUE lines, as compose reads .env.
func readEnvFile(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	vars := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			vars[k] = v
		}
	}
	return vars
}

// TestComposeConfigLoads runs payd's own configuration loading on what
// compose would hand each service: with the placeholder defaults (or the
// example .env unchanged) production payd refuses to start; with real
// secrets in .env both services' configurations load.
func TestComposeConfigLoads(t *testing.T) {
	c := loadCompose(t)
	f, err := os.Open(filepath.Join(repoRoot, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	example := readEnvFile(t, f)
	raw, _ := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	for _, m := range composeVar.FindAllStringSubmatch(string(raw), -1) {
		if _, ok := example[m[1]]; !ok {
			t.Errorf("docker-compose.yml uses ${%s}, which .env.example does not document", m[1])
		}
	}
	for name, vars := range map[string]map[string]string{"defaults": nil, ".env.example": example} {
		_, err := loadConfig("serve", nil, serviceEnv(c.Services["payd"], vars), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "PAYD_") {
			t.Errorf("payd config with %s = %v, want a refusal naming the secret", name, err)
		}
	}
	secrets := map[string]string{
		"MYSQL_PASSWORD": "Qx7pL2vN9rT4wZ8k", "MYSQL_ROOT_PASSWORD": "Rr5mK8qW2xN7pL4z",
		"PAYD_ADMIN_TOKEN": "adm_7f3a91c04e6b2d58a3f0c7e19b4d62a8", "PAYD_SECRET_KEY": "9c1e4b7a02f85d36e1c9a7b40d2f68e3",
		"PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_MERCHANT_KEY": "sk_5e8a1c3f7b9d2e4a6c8f0b1d3e5a7c9f",
	}
	cfg, err := loadConfig("serve", nil, serviceEnv(c.Services["payd"], secrets), io.Discard)
	if err != nil {
		t.Fatalf("payd config with real secrets = %v, want it to load", err)
	}
	for _, name := range []string{"PAYD_ADMIN_TOKENS", "PAYD_MERCHANT_KEYS", "PAYD_RECONCILE_EVERY", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if _, ok := example[name]; !ok {
			t.Errorf(".env.example does not document %s", name)
		}
		if v := serviceEnv(c.Services["payd"], map[string]string{name: "passed-through"})(name); v != "passed-through" {
			t.Errorf("docker-compose.yml hands payd %s = %q, want .env's value passed through", name, v)
		}
	}
	if cfg.Env != "production" || cfg.ProviderURL == "" || !strings.HasPrefix(cfg.DatabaseURL, "mysql://payd:"+secrets["MYSQL_PASSWORD"]+"@") {
		t.Errorf("payd config = env %q, provider %q, want production against the sandbox service and MySQL", cfg.Env, cfg.ProviderURL)
	}
	sbCfg, err := loadConfig("sandbox", nil, serviceEnv(c.Services["sandbox"], secrets), io.Discard)
	if err != nil {
		t.Fatalf("sandbox config with real secrets = %v, want it to load", err)
	}
	if _, err := sandboxConfig(sbCfg, sbCfg.SandboxWebhookURL, nil); err != nil {
		t.Errorf("sandboxConfig(compose settings) = %v, want it valid", err)
	}
	if sbCfg.WebhookSecret != cfg.WebhookSecret {
		t.Errorf("the sandbox signs with %q, payd verifies %q", sbCfg.WebhookSecret, cfg.WebhookSecret)
	}
}
