package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/ctl"
)

// runCtl runs timerctl in-process without any Redis.
func runCtl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = ctl.Run(context.Background(), append([]string{"timerctl", "--redis", "redis://127.0.0.1:1/0"}, args...), ctl.Options{Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// TestAPITokenCreate: the minted token is printed once, with a line for
// the tokens file that holds only its hash and that the worker loads; the
// token then has exactly the rights and namespaces asked for.
func TestAPITokenCreate(t *testing.T) {
	code, out, errOut := runCtl(t, "-o", "json", "api-token", "create", "billing-svc", "--namespace", "billing,billing-*",
		"--namespace", "orders", "--rights", "read,write", "--rps", "20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Name, Token, Line string }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if got.Name != "billing-svc" || !strings.HasPrefix(got.Token, apitoken.Prefix) || strings.Contains(got.Line, got.Token) {
		t.Fatalf("got %+v", got)
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(got.Line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := apitoken.Load(file)
	if err != nil {
		t.Fatalf("the printed line does not load: %v", err)
	}
	tok := set.Lookup(got.Token)
	if tok == nil {
		t.Fatal("the printed token does not match its line")
	}
	if !tok.Allows(apitoken.Write, "billing-eu") || !tok.Allows(apitoken.Read, "orders") || tok.Allows(apitoken.Admin, "orders") ||
		tok.Allows(apitoken.Read, "shipping") || !tok.HasRPS || tok.RPS != 20 {
		t.Errorf("token %+v: not the rights, namespaces and rps asked for", tok)
	}

	code, out, _ = runCtl(t, "api-token", "create", "ops", "--namespace", "*", "--rights", "admin")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(lines[0], "shown only now") || !strings.HasPrefix(strings.TrimSpace(lines[1]), apitoken.Prefix) ||
		!strings.HasPrefix(strings.TrimSpace(lines[3]), "ops sha256:") || !strings.Contains(lines[2], "SIGHUP") {
		t.Errorf("table output: exit %d\n%s", code, out)
	}
}

// TestAPITokenCreateRefusals: what the tokens file would refuse is refused
// here, as usage errors with a fix.
func TestAPITokenCreateRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"api-token", "create", "x", "--rights", "read"}, "needs --namespace"},
		{[]string{"api-token", "create", "x", "-n", "a"}, "needs --rights"},
		{[]string{"api-token", "create", "x", "-n", "a", "--rights", "read,root"}, `"root" is not a right`},
		{[]string{"api-token", "create", "x", "-n", "bad ns", "--rights", "read"}, "namespace pattern"},
		{[]string{"api-token", "create", "b/ad", "-n", "a", "--rights", "read"}, "token name"},
		{[]string{"api-token", "create", "-n", "a", "--rights", "read"}, "takes one token name"},
		{[]string{"api-token", "create", "x", "-n", "a", "--rights", "read", "--rps", "-1"}, "--rps -1 is negative"},
		{[]string{"api-token", "revoke", "x"}, "takes create"},
	} {
		code, _, errOut := runCtl(t, tc.args...)
		if code != ctl.ExitUsage || !strings.Contains(errOut, tc.want) || strings.Count(errOut, ": ") < 2 {
			t.Errorf("%v: exit %d %q, want 2 saying %q with a fix", tc.args, code, errOut, tc.want)
		}
	}
}
