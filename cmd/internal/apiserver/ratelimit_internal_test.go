package apiserver

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/timerq/timerq/api/apitoken"
)

// TestReloadForgetsRevokedTokensBuckets: a reload drops the rate-limit
// buckets of tokens no longer in the file, and keeps the others (so a
// reload does not refill them).
func TestReloadForgetsRevokedTokensBuckets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(names ...string) {
		var data []byte
		for _, n := range names {
			_, tk, err := apitoken.Mint(n, []string{"*"}, []apitoken.Right{apitoken.Read})
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, tk.Line()+" rps=1\n"...)
		}
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("keep", "drop")
	s, err := Listen(Config{Addr: "127.0.0.1:0", TokensFile: file}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set := s.tokens.Load()
	for _, n := range []string{"keep", "drop"} {
		if _, ok := s.take(set.Named(n)); !ok {
			t.Fatalf("first request of %s limited", n)
		}
	}
	write("keep")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.buckets["drop"]; ok {
		t.Error("the revoked token's bucket survived the reload")
	}
	if _, ok := s.take(s.tokens.Load().Named("keep")); ok {
		t.Error("the reload refilled a kept token's bucket")
	}
}
