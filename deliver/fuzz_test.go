package deliver_test

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/timerq/timerq/deliver"
)

// FuzzValidateURL: whatever ValidateURL accepts is an http(s) URL with a
// host, without user information, whose address literal (if it has one)
// the default guard lets through, and whose host name does not end in a
// number (which resolvers would read as an IPv4 address); and it never
// panics.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hook", "http://127.0.0.1:80/", "http://[::ffff:127.0.0.1]/", "http://[fe80::1%25lo]/",
		"http://0x7f.1/", "http://2130706433/", "http://017700000001/", "http://user@example.com/",
		"HTTP://EXAMPLE.COM", "http://example.com#x", "http:/example.com", "//example.com", "http://[64:ff9b::a00:1]/",
		"http://localhost./", "https://a.localhost:8443/", "http://169.254.169.254/latest", "http://[::]/",
		"http://１２７．０．０．１/", "http://127。0。0。1/", "http://①②⑦.0.0.1/", "http://[2002:a9fe:a9fe::]/", "http://127.0.0.1./",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := deliver.ValidateURL(raw, nil)
		if err != nil {
			return
		}
		again, perr := url.Parse(raw)
		if perr != nil || again.Scheme != "http" && again.Scheme != "https" || again.User != nil || again.Hostname() == "" {
			t.Fatalf("ValidateURL accepted %q (scheme %q, user %v, host %q)", raw, again.Scheme, again.User, again.Hostname())
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := (*deliver.Guard)(nil).CheckAddr("", a); err != nil {
				t.Fatalf("ValidateURL accepted %q, whose address the guard refuses: %v", raw, err)
			}
		}
		if h := strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
			t.Fatalf("ValidateURL accepted %q", raw)
		}
		if _, err := netip.ParseAddr(u.Hostname()); err != nil {
			labels := strings.Split(strings.TrimSuffix(u.Hostname(), "."), ".")
			if last := labels[len(labels)-1]; last != "" && strings.Trim(last, "0123456789") == "" {
				t.Fatalf("ValidateURL accepted %q, whose host ends in a number", raw)
			}
		}
	})
}
