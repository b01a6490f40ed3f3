// Package apitoken is the bearer tokens of timerworker's HTTP API: the
// tokens file, minting a token, and reading one from a request. Which
// right a request needs is the API's routes' to say (api.Right).
//
// It sits above package api, whose rights it grants, on the floor of
// the adapters (docs/development.md, "Floors"): timerworker's API server
// and timerctl use it, and so does internal/workertest (the tests of
// examples/http and clients), which is why
// it is not under cmd/internal.
//
// The file holds one token a line, and of each token only its SHA-256
// hash, never the token:
//
//	# NAME HASH namespaces=PATTERN[,PATTERN...] rights=RIGHT[,RIGHT...] [rps=N]
//	billing-svc sha256:9f86d0…0a08 namespaces=billing,billing-* rights=read,write rps=200
//	ops         sha256:60303a…5d1c namespaces=* rights=read,write,admin
//
// A plain SHA-256 is enough because every token is minted here with 256
// random bits (Mint): a slow password hash (bcrypt, argon2) protects a
// secret a person chose, which could be guessed; no one can guess 2^256.
// A fast hash also costs each request about a microsecond, where bcrypt
// would cost tens of milliseconds. So the file is not a secret (no one can
// turn a hash back into a token), but whoever can write it can grant
// themselves any right: only the worker's user may write it.
package apitoken

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// Right is what a token may do on the namespaces it matches: the rights
// the API's routes ask for (api.Right; each route says which it needs).
// The rights are independent: write does not imply read, so a producer's
// token can schedule timers without reading anyone's payloads.
type Right = api.Right

// The rights a token may hold.
const (
	// Read allows the routes that change nothing (GET and HEAD).
	Read = api.RightRead
	// Write allows the routes that change timers, schedules, consumer
	// groups and flow policies.
	Write = api.RightWrite
	// Admin allows creating a namespace and changing its endpoints and
	// delivery policy.
	Admin = api.RightAdmin
)

var allRights = []Right{Read, Write, Admin}

// Prefix starts every token Mint makes, so that secret scanners and people
// can tell a timerq token when they see one.
const Prefix = "tq_"

// HashPrefix starts the hash field of a tokens-file line: the algorithm,
// so that another can be added without ambiguity.
const HashPrefix = "sha256:"

// Token is one line of the tokens file.
type Token struct {
	// Name identifies the token in the log and in 403 and 429 details;
	// unique in the file.
	Name string
	// Hash is the SHA-256 of the token.
	Hash [sha256.Size]byte
	// Namespaces are glob patterns (path.Match: *, ?, [a-z]) of the
	// namespaces the token may touch; "*" matches every namespace.
	Namespaces []string
	// Rights are the token's rights on those namespaces.
	Rights []Right
	// RPS is the token's limit in requests per second; meaningful only
	// when HasRPS. 0 means unlimited.
	RPS float64
	// HasRPS reports whether the line sets rps=; without it the server's
	// default (timerworker --api-rate-limit) applies.
	HasRPS bool
}

// Has reports whether t has right.
func (t *Token) Has(right Right) bool { return slices.Contains(t.Rights, right) }

// Matches reports whether one of t's patterns matches namespace ns.
// AllNamespaces matches only the pattern "*" itself.
func (t *Token) Matches(ns string) bool {
	for _, p := range t.Namespaces {
		if p == "*" {
			return true
		}
		if ns == AllNamespaces {
			continue
		}
		if ok, _ := path.Match(p, ns); ok {
			return true
		}
	}
	return false
}

// Allows reports whether t may use right on namespace ns.
func (t *Token) Allows(right Right, ns string) bool { return t.Has(right) && t.Matches(ns) }

// Line is t as a line of the tokens file.
func (t *Token) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s%s namespaces=%s rights=", t.Name, HashPrefix, hex.EncodeToString(t.Hash[:]), strings.Join(t.Namespaces, ","))
	for i, r := range t.Rights {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(r))
	}
	if t.HasRPS {
		b.WriteString(" rps=" + strconv.FormatFloat(t.RPS, 'f', -1, 64))
	}
	return b.String()
}

// Hash returns the SHA-256 of a token, as the file stores it.
func Hash(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// Mint makes a new token from 32 random bytes and returns it with its
// line (t.Hash filled in). It checks the line as Parse would.
func Mint(name string, namespaces []string, rights []Right) (token string, t Token, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Token{}, fmt.Errorf("apitoken: reading random bytes: %w", err)
	}
	token = Prefix + base64.RawURLEncoding.EncodeToString(b[:])
	t = Token{Name: name, Hash: Hash(token), Namespaces: namespaces, Rights: rights}
	if err := t.check(); err != nil {
		return "", Token{}, err
	}
	return token, t, nil
}

// Error is a fault in the tokens file or in a token's description.
type Error struct {
	File    string // empty for Mint
	Line    int    // 0 when no line is to blame
	Problem string
	Fix     string
}

func (e *Error) Error() string {
	where := ""
	switch {
	case e.File != "" && e.Line > 0:
		where = fmt.Sprintf("%s line %d: ", e.File, e.Line)
	case e.File != "":
		where = e.File + ": "
	}
	return where + e.Problem + ": " + e.Fix
}

// ErrNoTokens is wrapped by the error of a file that holds no token: a
// server given such a file would refuse every request, which is never
// what was meant.
var ErrNoTokens = errors.New("apitoken: the tokens file holds no token")

var (
	nameRe = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)
	hashRe = regexp.MustCompile(`^` + HashPrefix + `[0-9a-f]{64}$`)
)

// check validates t's fields, as Parse does a line's.
func (t *Token) check() error {
	if !nameRe.MatchString(t.Name) {
		return &Error{Problem: fmt.Sprintf("token name %q is not 1-64 characters of A-Z a-z 0-9 _ . @ -", t.Name),
			Fix: "name the token after its user, e.g. billing-svc"}
	}
	if len(t.Namespaces) == 0 {
		return &Error{Problem: fmt.Sprintf("token %s has no namespace pattern", t.Name),
			Fix: "give namespaces=PATTERN[,PATTERN], e.g. namespaces=orders,billing-* (or * for all)"}
	}
	for _, p := range t.Namespaces {
		if err := checkPattern(p); err != nil {
			return &Error{Problem: fmt.Sprintf("token %s: namespace pattern %q %v", t.Name, p, err),
				Fix: "use a namespace or a glob of one: orders, billing-*, team-[ab], * for all"}
		}
	}
	if len(t.Rights) == 0 {
		return &Error{Problem: fmt.Sprintf("token %s has no right", t.Name), Fix: "give rights=read, rights=read,write or rights=read,write,admin"}
	}
	for i, r := range t.Rights {
		if !slices.Contains(allRights, r) {
			return &Error{Problem: fmt.Sprintf("token %s: %q is not a right", t.Name, string(r)), Fix: "use read, write or admin, separated by commas"}
		}
		if slices.Contains(t.Rights[:i], r) {
			return &Error{Problem: fmt.Sprintf("token %s names the right %s twice", t.Name, r), Fix: "name each right once"}
		}
	}
	if t.HasRPS && !(t.RPS >= 0 && t.RPS <= 1e6) {
		return &Error{Problem: fmt.Sprintf("token %s: rps=%v is outside 0-1000000", t.Name, t.RPS), Fix: "give requests per second, e.g. rps=100; rps=0 means unlimited"}
	}
	return nil
}

// checkPattern refuses a pattern that is not a glob of namespaces: a
// literal one must be a valid namespace, so that a typo is caught here
// rather than as a 403 later.
func checkPattern(p string) error {
	if p == "" {
		return errors.New("is empty")
	}
	if _, err := path.Match(p, ""); err != nil {
		return errors.New("is not a glob pattern")
	}
	if strings.ContainsAny(p, "/, ") {
		return errors.New("holds a character no namespace has")
	}
	if !strings.ContainsAny(p, `*?[\`) {
		if err := queue.ValidateNamespace(p); err != nil {
			return errors.New("is not a valid namespace")
		}
	}
	return nil
}

// Set is the tokens of one file. It is immutable, so a server swaps a
// whole Set on reload.
type Set struct {
	tokens []Token
}

// Len returns how many tokens s holds.
func (s *Set) Len() int { return len(s.tokens) }

// Named returns the token called name, or nil.
func (s *Set) Named(name string) *Token {
	for i := range s.tokens {
		if s.tokens[i].Name == name {
			return &s.tokens[i]
		}
	}
	return nil
}

// hashEqual compares two hashes in constant time. It is a variable so that
// a test can count the comparisons.
var hashEqual = func(a, b []byte) int { return subtle.ConstantTimeCompare(a, b) }

// Lookup returns the token whose hash is that of presented, or nil. It
// compares the hash with every token's, in constant time and without
// stopping at a match, so the time taken says nothing about which token
// matched or how far a wrong one got.
func (s *Set) Lookup(presented string) *Token {
	h := Hash(presented)
	found := -1
	for i := range s.tokens {
		eq := hashEqual(h[:], s.tokens[i].Hash[:])
		// found becomes i when eq is 1, without a branch on eq.
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &s.tokens[found]
}

// Load reads and parses the tokens file at path. It refuses a file that
// others may write, since that would let any local user grant themselves
// rights.
func Load(file string) (*Set, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, &Error{File: file, Problem: "cannot read the tokens file: " + pathless(err),
			Fix: "create it with lines from 'timerctl api-token create', readable by the worker"}
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return nil, &Error{File: file, Problem: "the tokens file is writable by every user, who could grant themselves any right",
			Fix: "chmod o-w it; only the worker's operator should write it"}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{File: file, Problem: "cannot read the tokens file: " + pathless(err), Fix: "make it readable by the worker"}
	}
	return Parse(data, file)
}

func pathless(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse parses the tokens file's content; file names it in errors. It
// refuses the whole file at the first bad line, so that a typo never
// half-applies.
func Parse(data []byte, file string) (*Set, error) {
	s := &Set{}
	names := map[string]int{}
	hashes := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, err := parseLine(line)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.File, e.Line = file, n
			}
			return nil, err
		}
		if prev, dup := names[t.Name]; dup {
			return nil, &Error{File: file, Line: n, Problem: fmt.Sprintf("token name %s is on line %d too", t.Name, prev), Fix: "give each token its own name"}
		}
		if prev, dup := hashes[t.Hash]; dup {
			return nil, &Error{File: file, Line: n, Problem: fmt.Sprintf("the hash of token %s is on line %d too", t.Name, prev),
				Fix: "one token, one line: mint a separate token for each user"}
		}
		names[t.Name], hashes[t.Hash] = n, n
		s.tokens = append(s.tokens, t)
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{File: file, Problem: "cannot read the tokens file: " + err.Error(), Fix: "keep each line under 64 KiB"}
	}
	if len(s.tokens) == 0 {
		return nil, fmt.Errorf("%w: %s: add lines from 'timerctl api-token create'", ErrNoTokens, file)
	}
	return s, nil
}

func parseLine(line string) (Token, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return Token{}, &Error{Problem: "a line needs at least a name and a hash",
			Fix: "write NAME sha256:HEX namespaces=PATTERNS rights=RIGHTS [rps=N], as 'timerctl api-token create' prints"}
	}
	t := Token{Name: f[0]}
	if !hashRe.MatchString(f[1]) {
		return Token{}, &Error{Problem: fmt.Sprintf("token %s: the second field is not sha256: and 64 lowercase hex digits", t.Name),
			Fix: "copy the line 'timerctl api-token create' printed; the file holds the hash, never the token itself"}
	}
	_, _ = hex.Decode(t.Hash[:], []byte(f[1][len(HashPrefix):])) // hashRe checked it
	seen := map[string]bool{}
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return Token{}, &Error{Problem: fmt.Sprintf("token %s: %q is not a new key=value field", t.Name, kv),
				Fix: "give namespaces=, rights= and rps= once each"}
		}
		seen[k] = true
		switch k {
		case "namespaces":
			t.Namespaces = strings.Split(v, ",")
		case "rights":
			for _, r := range strings.Split(v, ",") {
				t.Rights = append(t.Rights, Right(r))
			}
		case "rps":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return Token{}, &Error{Problem: fmt.Sprintf("token %s: rps=%s is not a number", t.Name, v), Fix: "give requests per second, e.g. rps=100 or rps=0.5"}
			}
			t.RPS, t.HasRPS = n, true
		default:
			return Token{}, &Error{Problem: fmt.Sprintf("token %s: unknown field %q", t.Name, k), Fix: "the fields are namespaces=, rights= and rps="}
		}
	}
	return t, t.check()
}
