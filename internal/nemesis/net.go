package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// LinkKind says what a link carries, so a schedule can name links by role.
type LinkKind string

// The links payd has: to each database node, to the provider, to each
// Redis node, the provider's webhook deliveries back to payd, and payd's
// deliveries of order events to the merchant.
const (
	DBLink       LinkKind = "db"
	ProviderLink LinkKind = "provider"
	RedisLink    LinkKind = "redis"
	WebhookLink  LinkKind = "webhook"
	MerchantLink LinkKind = "merchant"
)

// Net is the set of proxied links of one test setup. Every link is a
// Toxiproxy proxy run in this process: no toxiproxy-server, no HTTP API.
// Toxiproxy logs through zerolog and counts through Prometheus; both are
// switched off here (a no-op logger, an empty registry of its own), so a
// test's output holds only what the test says. Some of its toxics log
// through zerolog's global logger instead (the bandwidth toxic's trace
// line at each interruption), so NewNet also sets zerolog's global level
// to disabled: nothing else in payd logs through zerolog.
type Net struct {
	server *toxiproxy.ApiServer
	quiet  context.Context // carries the no-op logger to toxiproxy calls that log through a context

	mu     sync.Mutex
	links  []*Link
	closed bool
}

// NewNet returns an empty Net.
func NewNet() *Net {
	zerolog.SetGlobalLevel(zerolog.Disabled) // atomic: safe beside toxics of other Nets
	nop := zerolog.Nop()
	return &Net{
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), nop),
		quiet:  nop.WithContext(context.Background()),
	}
}

// Link starts a proxy to upstream listening on a free port of 127.0.0.1;
// Addr says which.
func (n *Net) Link(name string, kind LinkKind, upstream string) (*Link, error) {
	return n.LinkAt(name, kind, "127.0.0.1:0", upstream)
}

// LinkAt starts a proxy to upstream listening on listen, for a client
// whose address cannot be chosen after the fact (a Redis Cluster's nodes
// announce their own addresses, for example).
func (n *Net) LinkAt(name string, kind LinkKind, listen, upstream string) (*Link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("nemesis: net is closed")
	}
	for _, l := range n.links {
		if l.Name == name {
			return nil, fmt.Errorf("nemesis: link %s exists", name)
		}
	}
	p := toxiproxy.NewProxy(n.server, name, listen, upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("nemesis: link %s on %s: %w", name, listen, err)
	}
	p.Lock()
	addr := p.Listen // the bound address once started
	p.Unlock()
	l := &Link{Name: name, Kind: kind, Upstream: upstream, addr: addr, proxy: p, quiet: n.quiet, toxics: map[string]string{}}
	n.links = append(n.links, l)
	return l, nil
}

// Links returns the links in the order they were made.
func (n *Net) Links() []*Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.links)
}

// Lookup returns the link named name.
func (n *Net) Lookup(name string) (*Link, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range n.links {
		if l.Name == name {
			return l, true
		}
	}
	return nil, false
}

// Heal removes every toxic on every link and starts again a link that was
// disabled.
func (n *Net) Heal() error {
	var errs []error
	for _, l := range n.Links() {
		errs = append(errs, l.Heal())
	}
	return errors.Join(errs...)
}

// Close stops every link: its listener and every connection through it.
// Links cannot be made after Close.
func (n *Net) Close() {
	n.mu.Lock()
	links := n.links
	n.closed = true
	n.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Link is one proxied wire. Its toxics apply to the connections already
// open through it as well as to new ones.
type Link struct {
	Name     string
	Kind     LinkKind
	Upstream string // the address the link forwards to

	addr  string
	proxy *toxiproxy.Proxy
	quiet context.Context

	mu       sync.Mutex
	settled  time.Time // no toxic is added before, see settle
	seq      int
	toxics   map[string]string // the toxics on the link now: name → stream
	disabled bool
	closed   bool
}

// Addr is the address to point the client at ("127.0.0.1:port").
func (l *Link) Addr() string { return l.addr }

func (l *Link) String() string {
	return fmt.Sprintf("%s(%s %s→%s)", l.Name, l.Kind, l.addr, l.Upstream)
}

// toxic is a toxic as Toxiproxy's API reads it.
type toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// Add puts the wire fault f on the link (f.Target is not read) and
// returns the toxic's name, for Remove.
//
// A direction of a link takes one toxic at a time. In Toxiproxy 2.5.0 a
// toxic that ends its connection (timeout, reset_peer, limit_data) stops
// reading while the toxic before it in the chain may be blocked handing
// it data, deaf to the interrupt that removing that toxic sends: the
// removal, and every later change to the link, then waits forever.
func (l *Link) Add(f Fault) (string, error) {
	attrs, err := toxicAttributes(f)
	if err != nil {
		return "", err
	}
	stream := f.Stream
	if stream == "" {
		stream = Downstream
	}
	if stream != Upstream && stream != Downstream {
		return "", fmt.Errorf("nemesis: %s: stream %q is neither %s nor %s", f.Kind, stream, Upstream, Downstream)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", fmt.Errorf("nemesis: link %s is closed", l.Name)
	}
	for name, s := range l.toxics {
		if s == stream {
			return "", fmt.Errorf("nemesis: %s on %s %s: %s is on it (one toxic per direction)", f.Kind, l.Name, stream, name)
		}
	}
	time.Sleep(time.Until(l.settled))
	l.seq++
	name := fmt.Sprintf("%s_%s_%d", f.Kind, stream, l.seq)
	body, err := json.Marshal(toxic{Name: name, Type: string(f.Kind), Stream: stream, Toxicity: 1, Attributes: attrs})
	if err != nil {
		return "", err
	}
	if _, err := l.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return "", fmt.Errorf("nemesis: %s on %s: %w", f.Kind, l.Name, err)
	}
	l.toxics[name] = stream
	return name, nil
}

// toxicAttributes translates a wire fault into its toxic's attributes
// (Toxiproxy counts time in milliseconds and bandwidth in KB/s).
func toxicAttributes(f Fault) (map[string]any, error) {
	switch f.Kind {
	case Latency:
		return map[string]any{"latency": f.Latency.Milliseconds(), "jitter": f.Jitter.Milliseconds()}, nil
	case Timeout, ResetPeer:
		return map[string]any{"timeout": f.Timeout.Milliseconds()}, nil
	case SlowClose:
		return map[string]any{"delay": f.Timeout.Milliseconds()}, nil
	case Bandwidth:
		if f.RateKB <= 0 {
			return nil, fmt.Errorf("nemesis: bandwidth of %d KB/s", f.RateKB)
		}
		return map[string]any{"rate": f.RateKB}, nil
	case LimitData:
		return map[string]any{"bytes": f.Bytes}, nil
	}
	return nil, fmt.Errorf("nemesis: %s is not a wire fault", f.Kind)
}

// Remove takes the toxic name off the link. Removing a timeout toxic
// closes the connections it held, as Toxiproxy does: they were dead.
func (l *Link) Remove(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.toxics[name]; !ok {
		return fmt.Errorf("nemesis: no toxic %s on %s", name, l.Name)
	}
	delete(l.toxics, name)
	defer l.settle()
	if err := l.proxy.Toxics.RemoveToxic(l.quiet, name); err != nil {
		return fmt.Errorf("nemesis: remove %s from %s: %w", name, l.Name, err)
	}
	return nil
}

// Toxics returns the names of the toxics on the link now, sorted.
func (l *Link) Toxics() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.toxics))
	for name := range l.toxics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Disable cuts the link: it stops listening and closes every connection
// through it, as a crashed peer would. Enable or Heal starts it again on
// the same address.
func (l *Link) Disable() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.disabled {
		return
	}
	l.disabled = true
	l.proxy.Stop()
}

// Enable starts a disabled link again.
func (l *Link) Enable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enable()
}

func (l *Link) enable() error {
	if l.closed || !l.disabled {
		return nil
	}
	if err := l.proxy.Start(); err != nil {
		return fmt.Errorf("nemesis: start %s again on %s: %w", l.Name, l.addr, err)
	}
	l.disabled = false
	return nil
}

// Heal removes every toxic on the link and enables it if it was disabled.
func (l *Link) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if len(l.toxics) > 0 {
		l.proxy.Toxics.ResetToxics(l.quiet)
		clear(l.toxics)
		l.settle()
	}
	return l.enable()
}

// settleTime is how long Toxiproxy may take to tear down the connections
// a removal closed. A connection whose toxic stub was closed (a timeout
// toxic's removal closes its connections; so does a connection's own end)
// keeps, until its goroutines are done, a chain of stubs longer than the
// link's chain of toxics, and a toxic added to the link meanwhile indexes
// past the end of the chain: Toxiproxy 2.5.0 panics (ToxicLink.AddToxic).
// Waiting this long after a removal before the next toxic on the link
// leaves the teardown, microseconds when the peers read, time to finish.
const settleTime = 100 * time.Millisecond

// settle holds the next Add back for settleTime; l.mu is held.
func (l *Link) settle() { l.settled = time.Now().Add(settleTime) }

func (l *Link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	// Toxics first: a connection held by a black hole ends with its toxic.
	l.proxy.Toxics.ResetToxics(l.quiet)
	clear(l.toxics)
	l.proxy.Stop()
}
