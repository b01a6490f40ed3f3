// Package redisurl parses the Redis URLs that timerworker and timerctl take
// in --redis (TIMERQ_REDIS_URL), and redacts them for messages.
package redisurl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Parse turns a --redis URL into client options. It accepts the
// forms go-redis parses:
//
//   - redis://[user:pass@]host:port/db, rediss://... (TLS) and unix://path:
//     a single server (redis.ParseURL);
//   - any of those with master_name=NAME: Sentinel, the host and addr=
//     parameters being the sentinels (redis.ParseFailoverURL); there the
//     user:pass@ part authenticates to the sentinels, and the master's
//     credentials are the username= and password= parameters;
//   - redis://host:port?addr=host2:port2...: Redis Cluster seeds
//     (redis.ParseClusterURL); add cluster=1 for a single seed.
//
// Its errors are *Error, and never contain the password.
func Parse(raw string) (*redis.UniversalOptions, error) {
	if fixed, ok := withScheme(raw); ok {
		// "127.0.0.1:6379" or "user:pw@host:6379": url.Parse fails, or
		// takes "127.0.0.1" or "user" for a scheme.
		return nil, &Error{
			Problem: fmt.Sprintf("--redis %s has no scheme", Redact(fixed)[len("redis://"):]),
			Fix:     fmt.Sprintf("add redis:// (rediss:// for TLS): --redis %s", Redact(fixed)),
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, &Error{
			Problem: fmt.Sprintf("--redis %q is not a URL", Redact(raw)),
			Fix:     "use redis://[user:password@]host:port/db, rediss:// for TLS, or unix:///path/to/redis.sock",
		}
	}
	if hostless(u) {
		// "redis:user:pw@host" or "user:pw@host:6379": go-redis would
		// accept the first and quietly connect to localhost.
		return nil, &Error{
			Problem: fmt.Sprintf("--redis %s is not a URL with a host (no '//' after %q)", Redact(raw), u.Scheme+":"),
			Fix:     "use redis://[user:password@]host:port/db, rediss:// for TLS, or unix:///path/to/redis.sock",
		}
	}
	q := u.Query()
	cluster := q.Get("cluster")
	if cluster != "" {
		// Our own parameter: go-redis rejects parameters it does not know.
		q.Del("cluster")
		u.RawQuery = q.Encode()
	}
	bad := func(err error) error {
		return &Error{
			Problem: fmt.Sprintf("--redis %s: %s", Redact(raw), redactErr(err, u)),
			Fix:     "see https://pkg.go.dev/github.com/redis/go-redis/v9#ParseURL for the accepted URL forms and parameters",
		}
	}
	switch {
	case q.Has("master_name"):
		o, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, bad(err)
		}
		return &redis.UniversalOptions{
			Addrs: o.SentinelAddrs, MasterName: o.MasterName, ClientName: o.ClientName, DB: o.DB,
			Protocol: o.Protocol, Username: o.Username, Password: o.Password,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolFIFO: o.PoolFIFO, PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
			MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
			ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime, TLSConfig: o.TLSConfig,
		}, nil
	case q.Has("addr") || cluster == "1" || cluster == "true":
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, bad(err)
		}
		return &redis.UniversalOptions{
			Addrs: o.Addrs, IsClusterMode: true, ClientName: o.ClientName,
			Protocol: o.Protocol, Username: o.Username, Password: o.Password,
			MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolFIFO: o.PoolFIFO, PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
			MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
			ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime, TLSConfig: o.TLSConfig,
			MaxRedirects: o.MaxRedirects, ReadOnly: o.ReadOnly, RouteByLatency: o.RouteByLatency, RouteRandomly: o.RouteRandomly,
		}, nil
	}
	o, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, bad(err)
	}
	return &redis.UniversalOptions{
		Addrs: []string{o.Addr}, ClientName: o.ClientName, DB: o.DB,
		Protocol: o.Protocol, Username: o.Username, Password: o.Password,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolFIFO: o.PoolFIFO, PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
		MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
		ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime, TLSConfig: o.TLSConfig,
		Dialer: o.Dialer,
	}, nil
}

// Error is a URL that does not parse: what is wrong with it, and what to do.
type Error struct {
	Problem string
	Fix     string
}

// Error returns "<Problem>: <Fix>".
func (e *Error) Error() string { return e.Problem + ": " + e.Fix }

// Redact returns raw with its password, and the value of every query
// parameter whose name mentions "password", replaced by "xxxxx". A string
// that does not parse as a URL is cut after "://" so that nothing in it can
// leak.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.Index(raw, "://"); i >= 0 {
			return raw[:i+3] + "…"
		}
		return "…"
	}
	// Without "//" a typed "user:password@host" is no userinfo to url.Parse
	// but an opaque part or a path: keep only the scheme.
	if hostless(u) {
		return u.Scheme + ":…"
	}
	// Return what was typed unless there is something to hide: re-encoding
	// would change an operator's URL in ways that have nothing to do with
	// secrets.
	changed := false
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		changed = true
	}
	q := u.Query()
	query := false
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
			query = true
		}
	}
	if query {
		u.RawQuery = q.Encode()
	}
	if !changed && !query {
		return raw
	}
	return u.String()
}

// withScheme returns raw with "redis://" in front, and true, when raw has
// no "://" and no known scheme but reads as host:port (with userinfo,
// path and query) once it has one.
func withScheme(raw string) (string, bool) {
	if raw == "" || strings.Contains(raw, "://") {
		return "", false
	}
	if scheme, _, ok := strings.Cut(raw, ":"); ok {
		switch strings.ToLower(scheme) {
		case "redis", "rediss", "unix":
			return "", false
		}
	}
	u, err := url.Parse("redis://" + raw)
	if err != nil || u.Host == "" || u.Port() == "" && !strings.Contains(raw, "@") {
		return "", false
	}
	return "redis://" + raw, true
}

// hostless reports a URL typed without "//" after the scheme whose
// "user:password@host" url.Parse therefore took for an opaque part or a
// path (a unix socket path may hold '@').
func hostless(u *url.URL) bool {
	return u.Opaque != "" || (u.Scheme != "unix" && u.Host == "" && strings.Contains(u.Path, "@"))
}

// redactErr removes the URL's secrets from an error text.
func redactErr(err error, u *url.URL) string {
	s := err.Error()
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = strings.ReplaceAll(s, pw, "xxxxx")
	}
	for k, vs := range u.Query() {
		if strings.Contains(strings.ToLower(k), "password") {
			for _, v := range vs {
				if v != "" {
					s = strings.ReplaceAll(s, v, "xxxxx")
				}
			}
		}
	}
	return s
}
