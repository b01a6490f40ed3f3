package apitoken

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mint returns a new token and its parsed line.
func mint(t *testing.T, name string, ns []string, rights ...Right) (string, Token) {
	t.Helper()
	tok, tk, err := Mint(name, ns, rights)
	if err != nil {
		t.Fatal(err)
	}
	return tok, tk
}

// TestMintLineParsesBack: the line Mint prints is what Parse reads, and
// only the minted token finds it.
func TestMintLineParsesBack(t *testing.T) {
	tok, tk := mint(t, "billing-svc", []string{"billing", "billing-*"}, Read, Write)
	if !strings.HasPrefix(tok, Prefix) || len(tok) != len(Prefix)+43 {
		t.Fatalf("token %q: want %s and 43 base64url characters (32 random bytes)", tok, Prefix)
	}
	tk.RPS, tk.HasRPS = 2.5, true
	line := tk.Line()
	if strings.Contains(line, tok) || strings.Contains(line, tok[len(Prefix):]) {
		t.Fatalf("the line holds the token itself: %s", line)
	}
	s, err := Parse([]byte("# comment\n\n"+line+"\n"), "tokens")
	if err != nil {
		t.Fatalf("Parse(%q): %v", line, err)
	}
	got := s.Lookup(tok)
	if got == nil || got.Name != "billing-svc" || got.Line() != line || got.RPS != 2.5 || !got.HasRPS {
		t.Fatalf("Lookup(minted) = %+v, want the line %q", got, line)
	}
	if s.Lookup(tok+"x") != nil || s.Lookup("") != nil {
		t.Error("Lookup found a token for a wrong secret")
	}
	other, _ := mint(t, "x", []string{"*"}, Read)
	if other == tok {
		t.Error("two Mints made the same token")
	}
}

// TestParseRefusesBadLines: each bad line is refused with its line number
// and a fix, and the whole file with it.
func TestParseRefusesBadLines(t *testing.T) {
	_, good := mint(t, "good", []string{"orders"}, Read)
	h := HashPrefix + strings.Repeat("ab", 32)
	for _, tc := range []struct{ line, want string }{
		{"lonely", "at least a name and a hash"},
		{"a tq_secretvalue namespaces=x rights=read", "never the token itself"},
		{"a sha256:ABC namespaces=x rights=read", "64 lowercase hex"},
		{"a " + h + " rights=read", "no namespace pattern"},
		{"a " + h + " namespaces=x", "no right"},
		{"a " + h + " namespaces=x rights=read,root", `"root" is not a right`},
		{"a " + h + " namespaces=x rights=read,read", "twice"},
		{"a " + h + " namespaces=x rights=read rps=fast", "not a number"},
		{"a " + h + " namespaces=x rights=read rps=-1", "outside"},
		{"a " + h + " namespaces=x rights=read color=red", "unknown field"},
		{"a " + h + " namespaces=x namespaces=y rights=read", "once each"},
		{"a " + h + " namespaces=[x rights=read", "not a glob"},
		{"a " + h + " namespaces=or/ders rights=read", "holds a character"},
		{"a " + h + " namespaces=bad!ns rights=read", "not a valid namespace"},
		{"bad/name " + h + " namespaces=x rights=read", "token name"},
		{"good " + h + " namespaces=x rights=read", "token name good is on line 1 too"},
		{"copy" + strings.TrimPrefix(good.Line(), "good"), "hash of token copy is on line 1 too"},
	} {
		_, err := Parse([]byte(good.Line()+"\n"+tc.line+"\n"), "tokens.txt")
		var e *Error
		if !errors.As(err, &e) || e.Line != 2 || e.Fix == "" || !strings.Contains(err.Error(), tc.want) ||
			!strings.HasPrefix(err.Error(), "tokens.txt line 2: ") {
			t.Errorf("line %q: error %v; want tokens.txt line 2 saying %q with a fix", tc.line, err, tc.want)
		}
	}
	if _, err := Parse([]byte("# only comments\n"), "empty"); !errors.Is(err, ErrNoTokens) {
		t.Errorf("a file without tokens: %v, want ErrNoTokens", err)
	}
}

// TestLoadRefusesAWorldWritableFile: a file every user may write would
// let any of them grant themselves rights.
func TestLoadRefusesAWorldWritableFile(t *testing.T) {
	_, tk := mint(t, "a", []string{"*"}, Read)
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(tk.Line()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Load(file); err != nil || s.Len() != 1 {
		t.Fatalf("Load(0644) = %v, %v; want 1 token", s, err)
	}
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "chmod o-w") {
		t.Errorf("Load(0666) = %v, want a refusal saying chmod o-w", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "timerctl api-token create") {
		t.Errorf("Load(missing) = %v, want a fix naming timerctl api-token create", err)
	}
}

// TestLookupComparesEveryToken: Lookup compares the presented token's hash
// with every token's, once each, whether it matches the first, the last
// or none, so the time taken does not tell which.
func TestLookupComparesEveryToken(t *testing.T) {
	var lines []string
	var toks []string
	for _, name := range []string{"first", "middle", "last"} {
		tok, tk := mint(t, name, []string{"*"}, Read)
		toks, lines = append(toks, tok), append(lines, tk.Line())
	}
	s, err := Parse([]byte(strings.Join(lines, "\n")), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	real := hashEqual
	t.Cleanup(func() { hashEqual = real })
	hashEqual = func(a, b []byte) int { calls++; return real(a, b) }
	for i, presented := range append(toks, "tq_wrong") {
		calls = 0
		got := s.Lookup(presented)
		if i < 3 && (got == nil || got.Name != []string{"first", "middle", "last"}[i]) {
			t.Errorf("Lookup(token %d) = %v", i, got)
		}
		if i == 3 && got != nil {
			t.Errorf("Lookup(wrong) = %v, want nil", got.Name)
		}
		if calls != 3 {
			t.Errorf("Lookup(token %d) compared %d hashes, want all 3", i, calls)
		}
	}
}

// TestAllows: patterns are globs over namespaces, rights are independent,
// and only "*" covers a request that names no namespace.
func TestAllows(t *testing.T) {
	tk := Token{Name: "t", Namespaces: []string{"orders", "billing-*"}, Rights: []Right{Write}}
	for _, tc := range []struct {
		right Right
		ns    string
		want  bool
	}{
		{Write, "orders", true},
		{Write, "billing-eu", true},
		{Write, "billing", false},
		{Write, "orders2", false},
		{Read, "orders", false},
		{Admin, "orders", false},
		{Write, AllNamespaces, false},
	} {
		if got := tk.Allows(tc.right, tc.ns); got != tc.want {
			t.Errorf("Allows(%s, %q) = %v, want %v", tc.right, tc.ns, got, tc.want)
		}
	}
	all := Token{Namespaces: []string{"*"}, Rights: []Right{Read}}
	if !all.Allows(Read, AllNamespaces) || !all.Allows(Read, "x") {
		t.Error(`pattern "*" does not cover every namespace`)
	}
	star := Token{Namespaces: []string{"*-prod"}, Rights: []Right{Read}}
	if star.Allows(Read, AllNamespaces) {
		t.Error(`a pattern other than "*" covers a request that names no namespace`)
	}
}

// TestBearer: the scheme is case-insensitive (RFC 9110 §11.1), the token
// is what follows it, and anything else is no token.
func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		header, want string
		ok           bool
	}{
		{"Bearer tq_abc", "tq_abc", true},
		{"bearer tq_abc", "tq_abc", true},
		{"BEARER tq_abc", "tq_abc", true},
		{"BeArEr  tq_abc ", "tq_abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearertq_abc", "", false},
		{"", "", false},
	} {
		r := httptest.NewRequest("GET", "http://api/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if got, ok := Bearer(r); got != tc.want || ok != tc.ok {
			t.Errorf("Bearer(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}
