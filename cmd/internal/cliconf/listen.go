package cliconf

import (
	"net"
	"strings"
)

// IsLoopback reports whether addr (host:port) listens on loopback only:
// a loopback IP address or "localhost". An empty host (":8080") listens
// on every interface. Both servers that can run without credentials,
// `timerctl ui` and timerworker's --api-addr, refuse anything else unless
// credentials are configured, so this is the one place that decides it.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && IsLoopbackHost(host), err
}

// IsLoopbackHost reports whether a request's Host header (host or
// host:port) names a loopback address or localhost. A server without
// credentials answers only such requests, against DNS rebinding: a web page
// whose name an attacker re-points at 127.0.0.1 reaches the port, but its
// requests carry the attacker's host name.
func IsLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
