package redisurl

import (
	"errors"
	"strings"
	"testing"
)

func TestParseForms(t *testing.T) {
	cases := []struct {
		url     string
		addrs   string
		master  string
		cluster bool
		db      int
	}{
		{"redis://127.0.0.1:6379/2", "127.0.0.1:6379", "", false, 2},
		{"redis://:pw@s1:26379/0?master_name=mymaster&addr=s2:26379", "s1:26379,s2:26379", "mymaster", false, 0},
		{"redis://n1:7000?addr=n2:7000&addr=n3:7000", "n1:7000,n2:7000,n3:7000", "", true, 0},
		{"redis://n1:7000?cluster=1", "n1:7000", "", true, 0},
	}
	for _, c := range cases {
		o, err := Parse(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if got := strings.Join(o.Addrs, ","); got != c.addrs || o.MasterName != c.master || o.IsClusterMode != c.cluster || o.DB != c.db {
			t.Errorf("%s: addrs %s master %q cluster %v db %d", c.url, got, o.MasterName, o.IsClusterMode, o.DB)
		}
	}
}

func TestParseErrorsNeverShowThePassword(t *testing.T) {
	for _, raw := range []string{"redis://u:topsecret@host:6379/notadb", "127.0.0.1:6379", "redis://u:topsecret@host:6379/0?bogus=1",
		"redis:u:topsecret@host:6379/0", "redis:/u:topsecret@host", "u:topsecret@host:6379"} {
		_, err := Parse(raw)
		var e *Error
		if !errors.As(err, &e) || e.Fix == "" {
			t.Fatalf("%s: %v, want an *Error saying what to do", raw, err)
		}
		if strings.Contains(err.Error(), "topsecret") {
			t.Fatalf("%s: the password leaked: %v", raw, err)
		}
	}
}

func TestRedact(t *testing.T) {
	got := Redact("redis://ops:topsecret@host:6379/0?sentinel_password=alsosecret")
	if strings.Contains(got, "secret") || !strings.Contains(got, "ops:xxxxx@host") {
		t.Fatalf("Redact: %s", got)
	}
	if got := Redact("not a url ://x:y@%%"); strings.Contains(got, "y@") {
		t.Fatalf("Redact of garbage: %s", got)
	}
}

// TestParseWithoutScheme: a --redis typed without redis:// says so and
// shows the URL with the scheme added, its password redacted.
func TestParseWithoutScheme(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"127.0.0.1:6379", "--redis 127.0.0.1:6379 has no scheme: add redis:// (rediss:// for TLS): --redis redis://127.0.0.1:6379"},
		{"localhost:6379/2", "--redis localhost:6379/2 has no scheme: add redis:// (rediss:// for TLS): --redis redis://localhost:6379/2"},
		{"u:topsecret@cache.internal:6380", "--redis u:xxxxx@cache.internal:6380 has no scheme: add redis:// (rediss:// for TLS): --redis redis://u:xxxxx@cache.internal:6380"},
		{"[::1]:6379", "--redis redis://[::1]:6379"},
	} {
		_, err := Parse(c.raw)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("Parse(%q) = %v; want %q", c.raw, err, c.want)
		}
	}
	// A scheme typed without "//" keeps its own message.
	if _, err := Parse("redis:u:topsecret@host:6379"); err == nil || strings.Contains(err.Error(), "has no scheme") {
		t.Errorf("Parse(redis:u:…@host) = %v", err)
	}
}
