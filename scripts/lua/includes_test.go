package lua

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// code returns a Lua text without its comments and string literals, so
// that what remains names only what the text uses and defines. Long
// brackets ([[ ]], [=[ ]=]) are not used by timerq's scripts.
func code(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
		case c == '\'' || c == '"':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' {
					i++
				}
			}
			b.WriteString(`''`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// defined matches each name a Lua text defines at its top level:
// "local function f" or "local a, b = ..." at the start of a line.
var defined = regexp.MustCompile(`(?m)^local (?:function ([A-Za-z_]\w*)|([A-Za-z_][\w, ]*?))\s*(?:=|$|\()`)

func definitions(src string) []string {
	var names []string
	for _, m := range defined.FindAllStringSubmatch(code(src), -1) {
		if m[1] != "" {
			names = append(names, m[1])
			continue
		}
		for _, n := range strings.Split(m[2], ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	return names
}

// word matches each name a Lua text uses that is not a field (after '.'
// or ':').
var word = regexp.MustCompile(`(^|[^.:\w])([A-Za-z_]\w*)`)

func uses(src string) map[string]bool {
	m := map[string]bool{}
	for _, w := range word.FindAllStringSubmatch(code(src), -1) {
		m[w[2]] = true
	}
	return m
}

// includeNames returns every include and, for each name an include
// defines, the include that defines it.
func includeNames(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	paths, err := fs.Glob(files, "includes/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	owner := map[string]string{}
	for _, p := range paths {
		inc := strings.TrimSuffix(strings.TrimPrefix(p, "includes/"), ".lua")
		all = append(all, inc)
		for _, n := range definitions(include(inc)) {
			if o, ok := owner[n]; ok {
				t.Errorf("includes %s and %s both define %s", o, inc, n)
			}
			owner[n] = inc
		}
	}
	return all, owner
}

// checkUses reports, for the Lua text src of what (a script or an
// include) that declares the includes declared, each include it uses
// without declaring it, each it declares without using it, and each name
// of an include it defines again.
func checkUses(t *testing.T, what, src string, declared []string, owner map[string]string) {
	t.Helper()
	for _, n := range definitions(src) {
		if o, ok := owner[n]; ok && o != strings.TrimPrefix(what, "include ") {
			t.Errorf("%s defines %s, which the include %s defines: include it instead", what, n, o)
		}
	}
	used := map[string]bool{}
	for n := range uses(src) {
		if o, ok := owner[n]; ok && o != strings.TrimPrefix(what, "include ") {
			used[o] = true
			if !slices.Contains(declared, o) {
				t.Errorf("%s uses %s but does not declare the include %s", what, n, o)
			}
		}
	}
	for _, d := range declared {
		if !used[d] {
			t.Errorf("%s declares the include %s but uses none of its names", what, d)
		}
	}
}

// TestScriptsIncludeWhatTheyUse: every script and every include declares
// exactly the includes whose names it uses (Redis runs the whole text on
// every call, so a dead include costs every call, and an undeclared one is
// a nil global at run time), and the assembled source holds each include
// once.
func TestScriptsIncludeWhatTheyUse(t *testing.T) {
	all, owner := includeNames(t)
	for _, inc := range all {
		if !strings.HasPrefix(include(inc), "-- "+inc+" (include): ") {
			t.Errorf("includes/%s.lua does not start with its header line %q", inc, "-- "+inc+" (include): ")
		}
		checkUses(t, "include "+inc, include(inc), depends(inc), owner)
	}
	for _, s := range All {
		// The early part runs before the Includes are defined: it may use
		// only the Early ones.
		if head, _, split := strings.Cut(file(s.Name), IncludesHere); split {
			checkUses(t, s.Name+".lua above its includes line", head, s.Early, owner)
		} else if len(s.Early) > 0 {
			t.Errorf("%s has Early includes but no line %q", s.Name, IncludesHere)
		}
		checkUses(t, s.Name+".lua", file(s.Name), append(slices.Clone(s.Early), s.Includes...), owner)
		for _, n := range definitions(s.Source) {
			if strings.Count(s.Source, "\nlocal function "+n+"(") > 1 {
				t.Errorf("%s: the assembled source defines %s more than once", s.Name, n)
			}
		}
	}
}

// TestIncludesKeepNoStateAcrossCalls: as a Redis function (Library) a
// script's includes are defined once, when Redis loads the library, so a
// variable an include declares outside its functions outlives each call.
// Each such variable is a constant (upper case, set where it is declared)
// or is listed here with what resets it on every call; a value left over
// from an earlier call would be a stale clock (an early due time) or
// another call's keys.
func TestIncludesKeepNoStateAcrossCalls(t *testing.T) {
	perCall := map[string]string{
		"relative_base": "resolve_due reads TIME again when ARGV is another call's",
		"relative_for":  "resolve_due: the ARGV its relative_base was read for",
		"wake_at":       "wake_start, which scripts call before the other wake functions",
		"wake_moved":    "wake_start",
		"SCHED_KEY":     "recur_keys, which each recurring-schedule script calls first",
		"SDUE_KEY":      "recur_keys", "DELIVER_KEY": "recur_keys", "ENDPOINTS_KEY": "recur_keys",
		"META_KEY": "recur_keys", "OWNERS_KEY": "recur_keys", "EPOCHS_KEY": "recur_keys",
	}
	constant := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	topLocal := regexp.MustCompile(`(?m)^local ((?:\w+\s*,\s*)*\w+)(\s*=)?`)
	names, err := fs.Glob(files, "includes/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range names {
		b, err := fs.ReadFile(files, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range topLocal.FindAllStringSubmatch(code(string(b)), -1) {
			if strings.HasPrefix(m[1], "function") {
				continue
			}
			for _, name := range strings.Split(m[1], ",") {
				name = strings.TrimSpace(name)
				if perCall[name] != "" || (constant.MatchString(name) && m[2] != "") {
					continue
				}
				t.Errorf("%s: top-level local %s outlives a call in a Redis function library: make it a constant, or reset it on every call and list it here", f, name)
			}
		}
	}
}

// TestRelativeBaseIsSeededWithItsCall: a script that seeds resolve_due's
// clock sets relative_for with it; without it resolve_due reads TIME
// again, and a debounce window's due time no longer counts from the now
// it reports (seen: 1h0m0.001s after the call, want 1h).
func TestRelativeBaseIsSeededWithItsCall(t *testing.T) {
	seed := regexp.MustCompile(`(?m)^\s*relative_base\b.*=`)
	both := regexp.MustCompile(`(?m)^\s*relative_base,\s*relative_for\s*=\s*.+,\s*ARGV\s*$`)
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range names {
		b, err := fs.ReadFile(files, f)
		if err != nil {
			t.Fatal(err)
		}
		src := code(string(b))
		if n, m := len(seed.FindAllString(src, -1)), len(both.FindAllString(src, -1)); n != m {
			t.Errorf("%s seeds relative_base %d times, %d of them with relative_for = ARGV", f, n, m)
		}
	}
}
