// Command changedtests lists the Go tests that a range of commits added or
// changed, so that CI can run each of them several times before it lands
// (issue 27: a flaky test is cheapest to catch in the change that adds it).
//
// Usage:
//
//	go run .ci/changedtests/main.go BASE
//
// It prints one line per package directory, "DIR<TAB>REGEXP", where REGEXP
// is a -run pattern naming the package's top-level Test functions that are
// new or changed since BASE, or that call (through any chain of functions
// in the package's test files) a test helper that is. A line of a test file
// counts as changed when `git diff BASE HEAD` adds or changes it.
//
// It lives under .ci, which the go tool ignores, so it is not part of the
// module's packages; it needs nothing beyond the standard library.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run .ci/changedtests/main.go BASE")
		os.Exit(2)
	}
	lines, err := changedTests(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "changedtests:", err)
		os.Exit(1)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}

// changedTests returns the "DIR<TAB>REGEXP" lines for base..HEAD.
func changedTests(base string) ([]string, error) {
	out, err := git("diff", "--name-only", "--diff-filter=AMR", base, "HEAD", "--", "*_test.go")
	if err != nil {
		return nil, err
	}
	changed := map[string]map[int]bool{} // file -> changed line numbers (HEAD side)
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, ".") || strings.Contains(f, "/.") || strings.Contains(f, "testdata/") {
			continue
		}
		diff, err := git("diff", "-U0", base, "HEAD", "--", f)
		if err != nil {
			return nil, err
		}
		changed[f] = addedLines(diff)
	}
	byDir := map[string][]string{}
	for f := range changed {
		if inNestedModule(filepath.Dir(f)) {
			continue // its own CI step tests it (e.g. deploy/helm/chartcheck)
		}
		byDir[filepath.Dir(f)] = append(byDir[filepath.Dir(f)], f)
	}
	var lines []string
	for dir := range byDir {
		tests, err := testsInDir(dir, changed)
		if err != nil {
			return nil, err
		}
		if len(tests) > 0 {
			lines = append(lines, "./"+dir+"\t^("+strings.Join(tests, "|")+")$")
		}
	}
	sort.Strings(lines)
	return lines, nil
}

// inNestedModule reports whether dir (relative to the repository root,
// the working directory) belongs to a module of its own, which `go test`
// run at the root cannot name.
func inNestedModule(dir string) bool {
	for ; dir != "." && dir != "/" && dir != ""; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

var hunk = regexp.MustCompile(`^@@ -\S+ \+(\d+)(?:,(\d+))? @@`)

// addedLines reads a -U0 diff and returns the HEAD-side line numbers it
// adds or changes.
func addedLines(diff string) map[int]bool {
	lines := map[int]bool{}
	sc := bufio.NewScanner(strings.NewReader(diff))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := hunk.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		start, _ := strconv.Atoi(m[1])
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		for i := start; i < start+n; i++ {
			lines[i] = true
		}
	}
	return lines
}

// testsInDir returns the Test functions of the test files in dir that
// changed, or that reach a changed function through the calls among the
// package's test files.
func testsInDir(dir string, changed map[string]map[int]bool) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	refs := map[string]map[string]bool{} // function -> names its body mentions
	touched := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			return nil, err
		}
		// A package's external and internal test files share a directory
		// and run in one test binary, so one name space is close enough.
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if refs[name] == nil {
				refs[name] = map[string]bool{}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					refs[name][id.Name] = true
				}
				return true
			})
			from, to := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			// The doc comment belongs to the function too.
			if fn.Doc != nil {
				from = fset.Position(fn.Doc.Pos()).Line
			}
			for l := from; l <= to; l++ {
				if changed[f][l] {
					touched[name] = true
					break
				}
			}
		}
	}
	// Spread "touched" to every caller until nothing changes.
	for grew := true; grew; {
		grew = false
		for fn, names := range refs {
			if touched[fn] {
				continue
			}
			for name := range names {
				if touched[name] {
					touched[fn] = true
					grew = true
					break
				}
			}
		}
	}
	var tests []string
	for fn := range touched {
		if isTest(fn) {
			tests = append(tests, fn)
		}
	}
	sort.Strings(tests)
	return tests, nil
}

// isTest reports whether name is a go test entry point: Test, or Test
// followed by something that does not start with a lower-case letter.
func isTest(name string) bool {
	rest, ok := strings.CutPrefix(name, "Test")
	return ok && name != "TestMain" && (rest == "" || !('a' <= rest[0] && rest[0] <= 'z'))
}

func git(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
