package deliver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrRefused means the SSRF guard refused a target: its address is one
// that deliveries never reach unless an operator allows it (Guard.Allow,
// Guard.AllowHosts), or a redirect was not allowed.
var ErrRefused = errors.New("timerq: deliver: target refused by the SSRF guard")

// ErrInvalidURL means an endpoint URL is not an absolute http or https URL
// with a host and without user information.
var ErrInvalidURL = errors.New("timerq: deliver: invalid endpoint URL")

// Defaults of Guard.
const (
	// DefaultDialTimeout bounds one connection attempt.
	DefaultDialTimeout = 10 * time.Second
	// MaxRedirects is the most redirects Guard.MaxRedirects may allow.
	MaxRedirects = 10
)

// refused lists the ranges a delivery never reaches by default, with why.
var refused = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (\"this network\")"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT, RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (RFC 8215)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// sixToFour is 6to4 (RFC 3056): 2002:AABB:CCDD::/48 is routed to the IPv4
// address AA.BB.CC.DD.
var sixToFour = netip.MustParsePrefix("2002::/16")

// metadata lists cloud metadata and host agent addresses. Most lie in a
// refused range already; they are named so that an Allow of a whole range
// (169.254.0.0/16, fd00::/8, 100.64.0.0/10) does not open them: only an
// Allow of the one address does.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean…
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("169.254.169.123"), // AWS time sync
	netip.MustParseAddr("168.63.129.16"),   // Azure wire server (a public address)
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS DNS over IPv6
}

// Guard is the SSRF guard of deliveries: it refuses to connect to
// loopback, private (RFC 1918, fc00::/7), link-local, multicast,
// unspecified, CGNAT (100.64.0.0/10) and other special-use addresses, and
// to cloud metadata addresses, unless an operator allows them.
//
// The check is made on the address actually dialled, in the dialer's
// Control hook after name resolution, for every connection, including
// each hop of a redirect, so a name that resolves to a public address when
// an endpoint is registered and to a private one later (DNS rebinding) is
// still refused. The HTTP client of Client uses no proxy (a proxy would
// be the address dialled). The zero value refuses every range above and
// follows no redirect.
type Guard struct {
	// Allow lists address ranges that deliveries may reach even though
	// they are refused by default, such as 127.0.0.1/32 for a local
	// service or 10.1.0.0/16 for an internal network. A cloud metadata
	// address is reached only if a prefix of that single address
	// (169.254.169.254/32) is listed, never through a wider range.
	Allow []netip.Prefix

	// AllowHosts lists host names (compared case-insensitively, without a
	// trailing dot) whose every address may be reached, such as
	// "webhooks.internal". It trusts the name's DNS: prefer Allow.
	AllowHosts []string

	// MaxRedirects is how many 307 and 308 redirects one request follows,
	// each hop's URL validated and its address checked (Client says what
	// a hop carries). 0 follows none: a 3xx is the answer, and counts as
	// a failed attempt (Standard Webhooks: update the URL instead), as a
	// 301, 302 or 303 always does. At most MaxRedirects (10).
	MaxRedirects int

	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver *net.Resolver

	// DialTimeout bounds each connection attempt. 0 means
	// DefaultDialTimeout.
	DialTimeout time.Duration
}

// CheckAddr reports whether a delivery to host (the URL's host name or
// address literal, "" if unknown) may connect to addr: nil if so, else an
// error wrapping ErrRefused that says which range addr is in and how to
// allow it.
func (g *Guard) CheckAddr(host string, addr netip.Addr) error {
	// A zone (fe80::1%eth0) would make every prefix test false; an
	// IPv4-mapped address is its IPv4 address.
	addr = addr.WithZone("").Unmap()
	if g.hostAllowed(host) {
		return nil
	}
	if !addr.IsValid() {
		return fmt.Errorf("%w: no address", ErrRefused)
	}
	// NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits,
	// 6to4 (2002::/16) the one in bits 16-47: judge that address.
	if nat64.Contains(addr) {
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if err := g.CheckAddr(host, v4); err != nil {
			return fmt.Errorf("%s is NAT64 for %s: %w", addr, v4, err)
		}
	}
	if sixToFour.Contains(addr) {
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte(b[2:6]))
		if err := g.CheckAddr(host, v4); err != nil {
			return fmt.Errorf("%s is 6to4 for %s: %w", addr, v4, err)
		}
	}
	for _, m := range metadata {
		if addr == m {
			if g != nil {
				for _, p := range g.Allow {
					if p.IsSingleIP() && p.Addr().Unmap() == addr {
						return nil
					}
				}
			}
			in := ""
			for _, r := range refused {
				if r.prefix.Contains(addr) {
					in = ", in " + r.prefix.String()
				}
			}
			return fmt.Errorf("%w: %s is a cloud metadata address%s; only an allow entry of exactly that address opens it (timerworker --deliver-allow %s/%d; Guard.Allow in Go)",
				ErrRefused, addr, in, addr, addr.BitLen())
		}
	}
	if g != nil {
		for _, p := range g.Allow {
			if p.Contains(addr) || (p.Addr().Is4In6() && netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Contains(addr)) {
				return nil
			}
		}
	}
	for _, r := range refused {
		if r.prefix.Contains(addr) {
			return fmt.Errorf("%w: %s is a %s address (%s); if deliveries are meant to reach it, allow it (timerworker --deliver-allow %s/%d; Guard.Allow in Go)",
				ErrRefused, addr, r.what, r.prefix, addr, addr.BitLen())
		}
	}
	return nil
}

func (g *Guard) hostAllowed(host string) bool {
	if g == nil || host == "" || len(g.AllowHosts) == 0 {
		return false
	}
	host = strings.TrimSuffix(host, ".")
	for _, h := range g.AllowHosts {
		if strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}

// ValidateURL checks an endpoint URL without any network access: an
// absolute http or https URL, with a host, without user information
// ("https://user:pass@…") or a fragment, at most 2048 bytes; a host given
// as an address literal is checked as Guard.CheckAddr checks it (a nil
// Guard refuses every default range). It returns the parsed URL. Errors
// wrap ErrInvalidURL or ErrRefused.
//
// An IPv4 address must be written as four decimal numbers: other forms
// that resolvers read as addresses (0x7f000001, 2130706433, 0177.0.0.1,
// 127.1, a trailing dot) are refused for their form, whatever the address,
// as are host names that IDNA maps onto an address (full-width or
// circled digits and dots, １２７．０．０．１); a name that IDNA maps onto
// localhost is refused as localhost is.
//
// It is the check to run when an endpoint is registered. A host name is
// not resolved here (see Guard.ResolveURL): the address is checked again
// at every connection anyway.
func ValidateURL(raw string, g *Guard) (*url.URL, error) {
	u, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	host, err := asciiHost(u.Hostname())
	if err != nil {
		return nil, err
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := g.CheckAddr(host, addr); err != nil {
			return nil, err
		}
	} else if !g.hostAllowed(host) {
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if h == "localhost" || strings.HasSuffix(h, ".localhost") {
			return nil, fmt.Errorf("%w: %s names the loopback interface; allow 127.0.0.1/32 (timerworker --deliver-allow; Guard.Allow in Go) and use http://127.0.0.1:PORT/", ErrRefused, u.Hostname())
		}
	}
	return u, nil
}

// asciiHost returns the host as it is dialled: an address literal, or a
// name in ASCII (IDNA, as net/http maps it). It refuses a host that is an
// IPv4 address in any form but four decimal numbers, or that IDNA maps
// onto an address, so that what is judged is what is dialled.
func asciiHost(host string) (string, error) {
	const write = "write an IPv4 address as four decimal numbers (such as 93.184.216.34), or use a host name"
	if _, err := netip.ParseAddr(host); err == nil {
		return host, nil
	}
	ascii := host
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			a, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", fmt.Errorf("%w: host %q is not a valid internationalised domain name: %v", ErrInvalidURL, host, err)
			}
			ascii = a
			break
		}
	}
	if ascii != host {
		if _, err := netip.ParseAddr(ascii); err == nil || endsInNumber(ascii) {
			return "", fmt.Errorf("%w: host %q is read as the address %s (IDNA maps its characters to ASCII); %s", ErrInvalidURL, host, ascii, write)
		}
		return ascii, nil
	}
	if endsInNumber(host) {
		return "", fmt.Errorf("%w: host %q is read as an IPv4 address, but not written as four decimal numbers (hex, octal, fewer parts or a trailing dot); %s", ErrInvalidURL, host, write)
	}
	return host, nil
}

// endsInNumber reports whether a host name's last label (before a
// trailing dot) is a number, decimal or 0x hex: the WHATWG URL parser and
// inet_aton then read the whole host as an IPv4 address.
func endsInNumber(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := strings.ToLower(labels[len(labels)-1])
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// parseURL is ValidateURL's check of the URL's form, without the guard.
func parseURL(raw string) (*url.URL, error) {
	const want = "use an absolute http:// or https:// URL with a host, such as https://billing.example.com/hooks/timerq"
	if len(raw) > 2048 {
		return nil, fmt.Errorf("%w: it is %d bytes, above 2048", ErrInvalidURL, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; %s", ErrInvalidURL, err, want)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: scheme %q; %s", ErrInvalidURL, u.Scheme, want)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: it has user information before the host; put credentials in the endpoint's headers instead", ErrInvalidURL)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: no host; %s", ErrInvalidURL, want)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: it has a fragment (#…), which is never sent", ErrInvalidURL)
	}
	return u, nil
}

// ResolveURL is ValidateURL and, for a host name, a lookup of its
// addresses, each checked with CheckAddr: a registration-time check that
// gives an early, clear error. It is not the guard: an address that
// changes later is refused when dialled.
func (g *Guard) ResolveURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := ValidateURL(raw, g)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil || g.hostAllowed(host) {
		return u, nil
	}
	var r *net.Resolver
	if g != nil {
		r = g.Resolver
	}
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot resolve %s: %v", ErrInvalidURL, host, err)
	}
	for _, a := range addrs {
		if err := g.CheckAddr(host, a); err != nil {
			return nil, fmt.Errorf("%s resolves to %s: %w", host, a, err)
		}
	}
	return u, nil
}

// DialContext dials like net.Dialer.DialContext, refusing in the dialer's
// Control hook every address that CheckAddr refuses for the host in addr.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	timeout := DefaultDialTimeout
	var resolver *net.Resolver
	if g != nil {
		resolver = g.Resolver
		if g.DialTimeout > 0 {
			timeout = g.DialTimeout
		}
	}
	d := net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Resolver:  resolver,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot read the dialled address %q: %v", ErrRefused, address, err)
			}
			return g.CheckAddr(host, ap.Addr())
		},
	}
	return d.DialContext(ctx, network, addr)
}

// Transport returns an http.Transport that dials through the guard, uses
// no proxy, and keeps connections alive for reuse.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // the dialled address must be the target's
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 0, // the request's context bounds it
	}
}

// Client returns an http.Client that delivers through the guard: its
// Transport, and a redirect policy that follows at most MaxRedirects hops,
// each validated with ValidateURL (and checked again when dialled). Only
// 307 and 308 are followed, which repeat the POST with its body; a 301,
// 302 or 303 (which a client follows with a GET and no body) is returned
// as it is, as every 3xx is with MaxRedirects 0. A hop to another origin
// than the first request's (scheme, host and port) carries none of the
// endpoint's configured headers nor the signature, and no hop carries a
// Referer. Reuse one Client: it keeps connections alive.
func (g *Guard) Client() *http.Client {
	return &http.Client{Transport: g.Transport(), CheckRedirect: g.checkRedirect}
}

func (g *Guard) checkRedirect(req *http.Request, via []*http.Request) error {
	limit := 0
	if g != nil {
		limit = min(max(g.MaxRedirects, 0), MaxRedirects)
	}
	if limit == 0 {
		return http.ErrUseLastResponse
	}
	if r := req.Response; r != nil && r.StatusCode != http.StatusTemporaryRedirect && r.StatusCode != http.StatusPermanentRedirect {
		return http.ErrUseLastResponse // Send says why it was not followed
	}
	if len(via) > limit {
		return fmt.Errorf("%w: more than %d redirects", ErrRefused, limit)
	}
	if _, err := ValidateURL(req.URL.String(), g); err != nil {
		return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
	}
	// net/http copies the first request's headers onto each hop and adds
	// a Referer (the endpoint's URL) before it asks us.
	req.Header.Del("Referer")
	if !sameOrigin(via[0].URL, req.URL) {
		for k := range req.Header {
			if !slices.ContainsFunc(crossOrigin, func(c string) bool { return strings.EqualFold(c, k) }) {
				delete(req.Header, k)
			}
		}
	}
	return nil
}

// crossOrigin are the headers a redirect to another origin keeps: none of
// the endpoint's configured headers (they may hold credentials) nor the
// signature (valid for the endpoint's origin too, within its tolerance),
// only what describes the fire and its body.
var crossOrigin = []string{"Content-Type", "User-Agent", HeaderID, HeaderTimestamp, HeaderTimerID, HeaderDueAt,
	HeaderFiredAt, HeaderAttempt, HeaderTrace, HeaderOwner, HeaderEpoch}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}
