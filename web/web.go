// Package web is payd's pages: plain HTML, CSS and JavaScript, embedded in
// the binary with no build step. The checkout page (/checkout) sells the
// catalogue payd lists, sends SKUs and quantities and shows the amounts
// payd priced, and shows how a frontend holds up its end of payd's
// idempotency promise: one idempotency key per payment intent, kept across
// retries and reloads, and outcomes recovered from the server rather than
// guessed. The operators' console (/admin) searches orders, draws an
// order's timeline, resolves discrepancies, runs reconciliations and lists
// the catalogue through the admin API, with the same promise: one key per
// resolve or run intent. The landing page (/)
// links both, the OpenAPI document and the problem types. It imports
// nothing of payd, so any router can mount Handler, Console and Landing.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed checkout admin landing.html
var files embed.FS

// Prefix is the path the checkout page is served at; its assets live below it.
const Prefix = "/checkout"

// ConsolePrefix is the path the operators' console is served at; its
// assets live below it. The console holds no secret of its own: it works
// only with an operator token typed into it, sent to /v1/admin/... as a
// bearer token.
const ConsolePrefix = "/admin"

// policy lets the page load only its own files and talk only to its own
// origin: no inline script, no third party, no framing. A token held by the
// page is worth protecting from injected script.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// stripePolicy is policy widened for Stripe.js Elements (Stripe mode with a
// publishable key): its script, its frames (card fields, 3-D Secure) and
// its API, and nothing else.
const stripePolicy = "default-src 'none'; script-src 'self' https://js.stripe.com; style-src 'self'; img-src 'self' data: https://*.stripe.com; " +
	"connect-src 'self' https://api.stripe.com; frame-src https://js.stripe.com https://hooks.stripe.com; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Config is what the page needs to know about the provider, served as
// /checkout/config.json. The zero value is the sandbox.
type Config struct {
	// Provider is "sandbox" or "stripe".
	Provider string `json:"provider"`
	// StripePublishableKey (pk_…), in Stripe mode, lets the page collect a
	// card with Stripe.js Elements; without it the page offers Stripe's
	// test PaymentMethods only.
	StripePublishableKey string `json:"stripe_publishable_key,omitempty"`
}

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves GET and HEAD of /checkout (the page) and /checkout/{file}
// (its assets) for the sandbox. Anything else under the prefix is a
// plain 404 (a router asks Serves first to answer its own); other methods
// 405.
func Handler() *Site { return HandlerFor(Config{}) }

// HandlerFor is Handler for the provider cfg describes: the page reads
// cfg from /checkout/config.json.
func HandlerFor(cfg Config) *Site {
	if cfg.Provider == "" {
		cfg.Provider = "sandbox"
	}
	assets := load("checkout")
	body, _ := json.Marshal(cfg)
	sum := sha256.Sum256(body)
	assets["config.json"] = asset{body: body, ctype: "application/json", etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	csp := policy
	if cfg.Provider == "stripe" && cfg.StripePublishableKey != "" {
		csp = stripePolicy
	}
	return site(assets, Prefix, csp)
}

// Console serves the operators' console the same way: /admin (the page)
// and /admin/{file} (its assets), with the same headers.
func Console() *Site { return site(load("admin"), ConsolePrefix, policy) }

// Problem is a problem type the landing page links: /problems/{Code}.
type Problem struct {
	Code   string
	Status int
	Title  string
}

// landing is the landing page's template; its data is the []Problem to list.
var landing = template.Must(template.ParseFS(files, "landing.html"))

// Landing serves GET and HEAD of / : a page, in the checkout page's style,
// linking the checkout page, the console, the OpenAPI document (at
// /openapi.yaml) and the page of each problem in problems (at
// /problems/{code}), in the order given. Any other path is 404, with the
// same headers as the other pages.
func Landing(problems []Problem) http.Handler {
	var body bytes.Buffer
	if err := landing.Execute(&body, problems); err != nil {
		panic("web: landing page: " + err.Error()) // the template and its data are fixed at build time
	}
	sum := sha256.Sum256(body.Bytes())
	page := asset{body: body.Bytes(), ctype: contentType("index.html"), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	h := site(map[string]asset{"index.html": page}, "/", policy)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r) // only / itself: no file name below it is the page
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Site is one of the pages and its assets, an http.Handler.
type Site struct {
	assets map[string]asset
	prefix string
	http.Handler
}

// Serves reports whether the path p names the page or one of its files,
// so a router can answer anything else with its own 404.
func (s *Site) Serves(p string) bool {
	_, ok := s.assets[assetName(s.prefix, p)]
	return ok
}

// site serves assets at prefix under the Content-Security-Policy csp.
func site(assets map[string]asset, prefix, csp string) *Site {
	return &Site{assets: assets, prefix: prefix, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a, ok := assets[assetName(prefix, r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		// Revalidate every time (cheap, thanks to the ETag) so a new payd
		// release never runs against yesterday's script.
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})}
}

// assetName maps a request path to an embedded file name: the page itself
// for the prefix and the prefix with a slash, else the file name below it.
func assetName(prefix, p string) string {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return ""
	}
	if rest == "" || rest == "/" {
		return "index.html"
	}
	return strings.TrimPrefix(rest, "/")
}

// load reads every embedded file of dir once. Only files directly in dir
// are served: a lookup by exact name leaves no room for path tricks.
func load(dir string) map[string]asset {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		panic("web: embedded " + dir + " files missing: " + err.Error()) // a build defect, not a runtime condition
	}
	out := make(map[string]asset, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		body, err := files.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			panic("web: read embedded " + e.Name() + ": " + err.Error())
		}
		sum := sha256.Sum256(body)
		out[e.Name()] = asset{body: body, ctype: contentType(e.Name()), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8" // not left to the OS mime tables: modules need exactly this
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
