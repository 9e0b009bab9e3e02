package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
)

// Policy is what an outbound request may reach (ADR 0053): http and https
// only; in production (Guard) no address on payd's own side of the network
// — loopback, private, link-local, unspecified, multicast — unless listed
// in Allow (PAYD_NOTIFY_ALLOW_PRIVATE).
type Policy struct {
	Guard bool
	Allow []netip.Prefix
	// Resolve looks a host name up for CheckEndpointURL; nil: the
	// system's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ErrRefusedAddress is an endpoint whose address the policy refuses.
var ErrRefusedAddress = errors.New("address refused: loopback, private, link-local and multicast addresses are not reached in production")

// ParseAllow reads PAYD_NOTIFY_ALLOW_PRIVATE: comma-separated CIDRs (a
// bare address is its own /32 or /128).
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Allowed reports whether ip may be reached.
func (p Policy) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !p.Guard {
		return true
	}
	if slices.ContainsFunc(p.Allow, func(pr netip.Prefix) bool { return pr.Contains(ip) }) {
		return true
	}
	if v4, ok := embeddedV4(ip); ok {
		return p.Allowed(v4)
	}
	if nat64Local.Contains(ip) {
		return false
	}
	return !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || !ip.IsValid() ||
		cgnat.Contains(ip))
}

// cgnat is the shared address space (RFC 6598), private in all but name.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// The IPv6 ranges that carry an IPv4 address a host may end up reaching:
// NAT64 (RFC 6052), 6to4 (RFC 3056) and IPv4-compatible (RFC 4291), and
// NAT64's local-use range (RFC 8215), refused as a whole.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	v4Compat   = netip.MustParsePrefix("::/96")
)

// embeddedV4 is the IPv4 address an IPv6 address of those ranges carries.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case v4Compat.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	}
	return netip.Addr{}, false
}

// numericHost reports whether host looks like an IPv4 address in one of
// the forms resolvers accept but netip does not (2130706433, 0x7f000001,
// 127.1, 0177.0.0.1): its last label is a number.
func numericHost(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := strings.ToLower(labels[len(labels)-1])
	if strings.HasPrefix(last, "0x") {
		return true
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// CheckURL refuses an endpoint URL payd will not send to: not absolute
// http(s), with credentials, or (under the guard) naming a refused address
// literally or as localhost. A name is checked again, after resolution,
// on every connection (the dialer's Control).
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return errors.New("url must be an absolute http or https URL")
	}
	if u.User != nil {
		return errors.New("url must not carry credentials")
	}
	if u.Fragment != "" {
		return errors.New("url must not have a fragment")
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if !p.Allowed(ip) {
			return ErrRefusedAddress
		}
		return nil
	}
	if !p.Guard {
		return nil
	}
	if name := strings.ToLower(strings.TrimSuffix(host, ".")); name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return ErrRefusedAddress
	}
	if numericHost(host) {
		return fmt.Errorf("%w: %q is not an address in canonical form", ErrRefusedAddress, host)
	}
	return nil
}

// CheckWritten refuses an endpoint URL that is not written as payd will
// call it: a space, a control or a non-ASCII character (percent-encode
// it, or write a name in punycode), or anything Go's URL parser would
// rewrite on the way out (an upper-case scheme, a path it re-encodes).
// What the shop reads back is then exactly what payd sends to. Only new
// URLs are held to it (Admin.Create and a changed URL in Admin.Update):
// an endpoint stored before, or PAYD_NOTIFY_URL, keeps being called.
func CheckWritten(raw string) error {
	if i := strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r >= 0x7f }); i >= 0 {
		return fmt.Errorf("url must be written in URL characters: %q at byte %d is not one (percent-encode it, or write a name in punycode)", []rune(raw[i:])[0], i)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("url must be an absolute http or https URL")
	}
	if called := u.String(); called != raw {
		return fmt.Errorf("url must be written as payd calls it: %s", u.Redacted())
	}
	if i := badQueryByte(u.RawQuery); i >= 0 {
		return fmt.Errorf("url's query must be written in URL characters: %q at byte %d of it is not one (percent-encode it as %%XX)", u.RawQuery[i], i)
	}
	return nil
}

// badQueryByte is the first byte of an URL's raw query that RFC 3986 does
// not allow there (a quote, <, >, a backslash, a % not followed by two hex
// digits, ...), or -1. Go's parser keeps a query as written, so it is
// checked here: the path is checked by being written back.
func badQueryByte(q string) int {
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~!$&'()*+,;=:@/?", c) >= 0:
		case c == '%' && i+2 < len(q) && ishex(q[i+1]) && ishex(q[i+2]):
			i += 2
		default:
			return i
		}
	}
	return -1
}

func ishex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// resolveTimeout bounds CheckEndpointURL's look-up.
const resolveTimeout = 3 * time.Second

// CheckEndpointURL is CheckURL at an endpoint's creation or change, and
// under the guard also resolves a name: one refused address among its
// answers refuses it (the dialer would refuse every delivery to it). A
// name that does not resolve now is let through: the dialer checks it
// again on every connection.
func (p Policy) CheckEndpointURL(ctx context.Context, raw string) error {
	if err := p.CheckURL(raw); err != nil || !p.Guard {
		return err
	}
	u, _ := url.Parse(raw)
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	resolve := p.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := resolve(ctx, host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if !p.Allowed(a) {
			return fmt.Errorf("%w: %s resolves to %s", ErrRefusedAddress, host, a.Unmap())
		}
	}
	return nil
}

// control is the dialer's check of each address it is about to connect
// to, after DNS resolution: a name that resolves to 127.0.0.1 is refused
// like the literal.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if !p.Allowed(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", ap.Addr(), ErrRefusedAddress)
	}
	return nil
}

// NewClient is the bounded client deliveries are sent with: the whole
// request within timeout, no redirect followed (a 3xx is the answer), no
// proxy from the environment (it would dial for us, unchecked), and every
// connection's address checked by the policy.
func NewClient(timeout time.Duration, p Policy) *http.Client {
	d := &net.Dialer{Timeout: timeout, Control: p.control}
	t := &http.Transport{
		DialContext: d.DialContext, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: timeout, ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Timeout: timeout, Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// DialVia makes c, a client of NewClient, connect to addr whatever host
// a URL names; the URL's host stays the request's Host, and the policy's
// check of each address still applies. Test builds only
// (PAYD_TEST_NOTIFY_VIA): the nemesis reaches one merchant through a
// link of each replica's own.
func DialVia(c *http.Client, addr string) {
	t := c.Transport.(*http.Transport)
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) }
}

// Sender sends one delivery as a Standard Webhooks request.
type Sender struct {
	Client *http.Client
	Policy Policy
}

// Answer is what one request got: the endpoint's status (0: none), the
// transport's error, and the request and answer as the delivery log keeps
// them.
type Answer struct {
	Status      int
	Err         error
	RequestHead string
	Response    string
}

// maxResponse is how much of an answer's body is read and kept.
const maxResponse = 4 << 10

// Sign is the webhook-signature header of body sent as event id at at,
// one v1 signature per secret, space-separated (Standard Webhooks: a
// receiver accepts any one it can verify).
func Sign(secrets []string, id string, at time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", fmt.Errorf("endpoint secret: %w", err)
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// Send posts body to ep as event id at now, signed with every secret ep
// signs with at now.
func (s Sender) Send(ctx context.Context, ep domain.Endpoint, id string, body []byte, now time.Time) Answer {
	if err := s.Policy.CheckURL(ep.URL); err != nil {
		return Answer{Err: err}
	}
	sig, err := Sign(ep.Secrets(now), id, now, body)
	if err != nil {
		return Answer{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return Answer{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payd-notify/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	a := Answer{RequestHead: requestHead(req)}
	res, err := s.Client.Do(req)
	if err != nil {
		a.Err = err
		return a
	}
	defer res.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20)) // let the connection be reused
	a.Status, a.Response = res.StatusCode, responseText(res, head)
	return a
}

// requestHead is the request line and headers, as the delivery log shows
// them: the signature is no secret.
func requestHead(r *http.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.URL.RequestURI(), r.URL.Host)
	_ = r.Header.Write(&b)
	return b.String()
}

func responseText(res *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\r\n", res.Proto, res.Status)
	_ = res.Header.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	// a hostile endpoint's headers carry any byte too: the log keeps text
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}
