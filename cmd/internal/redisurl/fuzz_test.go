package redisurl

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var urlSeeds = []string{
	"redis://127.0.0.1:6379/0",
	"redis://ops:topsecret@host:6379/2",
	"rediss://:p%40ss%3Aw0rd@host:6380/0",
	"redis://u:topsecret@host:6379/notadb",
	"redis://:pw@s1:26379/0?master_name=mymaster&addr=s2:26379&sentinel_password=alsosecret",
	"redis://h:26379/0?master_name=m&Sentinel_Password=UPPERsecret&password=masterpass",
	"redis://n1:7000?addr=n2:7000&addr=n3:7000",
	"redis://n1:7000?cluster=1",
	"unix:///run/redis.sock?db=1",
	"unix://user:secretpw@/run/redis.sock",
	"redis://u:topsecret@host:6379/0?bogus=1",
	"redis://u:topsecret@[::1]:6379/0?dial_timeout=oops",
	"127.0.0.1:6379",
	"not a url ://x:y@%%",
	"redis://u:top%zzsecret@host/0",
	"",
	"redis:ops:topsecret@host:6379/0",
	"redis:/ops:topsecret@host",
	"ops:topsecret@host:6379",
}

// typedPassword finds what was typed as "user:password@" anywhere in raw,
// even where url.Parse sees no userinfo (no "//" after the scheme).
var typedPassword = regexp.MustCompile(`[^:/@?#]*:([^:@/?#]+)@`)

// secrets returns the passwords raw carries that are worth looking for in
// a text: the userinfo password and every *password* query value, each in
// its decoded and its raw (escaped) form, leaving out any short enough to
// occur by chance or that occurs elsewhere in raw (say, in the host name),
// where printing it is no leak.
func secrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		u = &url.URL{}
	}
	var out []string
	defer func() {
		for _, m := range typedPassword.FindAllStringSubmatch(raw, -1) {
			if len(m[1]) >= 6 && strings.Count(raw, m[1]) == 1 && !strings.Contains("xxxxx…", m[1]) {
				out = append(out, m[1])
			}
		}
	}()
	add := func(s, within string) {
		if len(s) >= 6 && strings.Count(within, s) <= 1 && !strings.Contains("xxxxx…", s) {
			out = append(out, s)
		}
	}
	if pw, ok := u.User.Password(); ok {
		// The password as typed: in the authority (after "://", up to the
		// first '/', '?' or '#'), before its last '@' and after the first ':'.
		if _, rest, ok := strings.Cut(raw, "://"); ok {
			if end := strings.IndexAny(rest, "/?#"); end >= 0 {
				rest = rest[:end]
			}
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				if _, rawPw, ok := strings.Cut(rest[:at], ":"); ok {
					add(rawPw, raw)
				}
			}
		}
		add(pw, raw)
	}
	for k, vs := range u.Query() {
		if strings.Contains(strings.ToLower(k), "password") {
			for _, v := range vs {
				add(v, raw)
				add(url.QueryEscape(v), raw)
			}
		}
	}
	return out
}

// FuzzRedact checks that Redact never panics, never leaks a password (the
// userinfo one, or a *password* query parameter, decoded or as typed), and
// keeps the host, so that a redacted URL still says where it points.
func FuzzRedact(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		red := Redact(raw)
		for _, s := range secrets(raw) {
			if strings.Contains(red, s) {
				t.Fatalf("Redact(%q) = %q leaks %q", raw, red, s)
			}
		}
		u, err := url.Parse(raw)
		if err != nil || red == u.Scheme+":…" {
			return // cut: nothing structural left to compare
		}
		ru, err := url.Parse(red)
		if err != nil {
			t.Fatalf("Redact(%q) = %q, which no longer parses: %v", raw, red, err)
		}
		if ru.Host != u.Host || ru.Scheme != u.Scheme || ru.Path != u.Path {
			t.Fatalf("Redact(%q) = %q: scheme/host/path %q %q %q, want %q %q %q", raw, red, ru.Scheme, ru.Host, ru.Path, u.Scheme, u.Host, u.Path)
		}
		if u.User != nil && ru.User.Username() != u.User.Username() {
			t.Fatalf("Redact(%q) = %q: user %q, want %q", raw, red, ru.User.Username(), u.User.Username())
		}
	})
}

// FuzzParse checks that Parse never panics; that its errors are *Error
// with a fix and without any password; and that an accepted URL keeps its
// host (the first address) and its credentials.
func FuzzParse(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		o, err := Parse(raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Problem == "" || e.Fix == "" {
				t.Fatalf("Parse(%q) = %v, want an *Error with a problem and a fix", raw, err)
			}
			for _, s := range secrets(raw) {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("Parse(%q): error %q leaks %q", raw, err, s)
				}
			}
			return
		}
		if o == nil || len(o.Addrs) == 0 {
			t.Fatalf("Parse(%q) = %+v, want at least one address", raw, o)
		}
		u, _ := url.Parse(raw)
		// An empty host means go-redis's default, localhost.
		if u.Scheme != "unix" && u.Hostname() != "" && !strings.Contains(o.Addrs[0], u.Hostname()) {
			t.Fatalf("Parse(%q): first address %q, want the URL's host %q", raw, o.Addrs[0], u.Hostname())
		}
		// go-redis gives a Sentinel URL's userinfo to the sentinels; the
		// master's password comes from ?password=.
		got := o.Password
		if o.MasterName != "" || u.Query().Has("master_name") {
			got = o.SentinelPassword
		}
		if pw, ok := u.User.Password(); ok && !u.Query().Has("password") && got != pw {
			t.Fatalf("Parse(%q): password %q, want %q", raw, got, pw)
		}
	})
}
