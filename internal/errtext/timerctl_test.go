package errtext_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// library is what an application imports (and what it imports in turn):
// its errors name Go calls, never timerctl's commands, which a library
// user may not run. timerctl adds its own hints where it prints an error
// (cmd/internal/ctl's classify).
var library = []string{"queue", "poller", "deliver", "schedule", "internal"}

// TestLibraryErrorsNameNoTimerctl fails on a string literal in the library's
// non-test code that names timerctl, unless it is operator telemetry: a log
// line's text or attributes, or a metric's help (prometheus.NewDesc, Help:),
// which an operator reads and where timerctl is the tool at hand.
func TestLibraryErrorsNameNoTimerctl(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range library {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			for _, at := range timerctlLiterals(t, path) {
				t.Errorf("%s:%d names timerctl in a library text: %s; name the Go call (and the HTTP route), and give timerctl's hint in cmd/internal/ctl (classify)", rel, at.line, at.text)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

type literal struct {
	line int
	text string
}

// timerctlLiterals returns the string literals of the Go file path that
// name timerctl outside operator telemetry.
func timerctlLiterals(t *testing.T, path string) []literal {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []literal
	walk := func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if telemetry(n) {
				return false
			}
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Help" {
				return false
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING && strings.Contains(n.Value, "timerctl") {
				out = append(out, literal{fset.Position(n.Pos()).Line, n.Value})
			}
		}
		return true
	}
	ast.Inspect(f, walk)
	return out
}

// telemetry reports whether call logs (a slog-style method: Debug, Info,
// Warn, Error, their Context forms, Log) or describes a metric
// (prometheus.NewDesc); errors.New and fmt.Errorf are not telemetry.
func telemetry(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if pkg, ok := sel.X.(*ast.Ident); ok {
		switch pkg.Name {
		case "errors", "fmt", "errtext":
			return false
		case "prometheus":
			return sel.Sel.Name == "NewDesc"
		}
	}
	switch strings.TrimSuffix(sel.Sel.Name, "Context") {
	case "Debug", "Info", "Warn", "Error", "Log":
		return len(call.Args) > 0
	}
	return false
}
