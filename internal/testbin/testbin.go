// Package testbin builds the module's commands for the tests that run them
// as processes: cmd/timerworker's, examples', cmd/timerbench's and, through
// internal/workertest, examples/http's and clients'. It is a test kit:
// only tests import it.
//
// Each of those packages used to build its binaries in a TestMain of its
// own, three copies of the same temporary directory, go build, removal
// and leak check; Main (or Build, for a package that builds on demand) is
// the one copy.
package testbin

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Race reports whether this test binary was built with -race (and so
// whether Build's race option matches it).
const Race = race

// Build builds the commands pkgs (import paths, or directories relative to
// the calling test's package, as go build takes them) with one go build
// into a new temporary directory, where each binary is named after its
// package's last element, and returns the directory. With race they are
// built with -race, for a test that wants the race detector in the
// processes it starts too. Remove the directory with os.RemoveAll once the
// tests ran.
func Build(race bool, pkgs ...string) (string, error) {
	dir, err := os.MkdirTemp("", "timerq-testbin-")
	if err != nil {
		return "", fmt.Errorf("testbin: a build directory: %w", err)
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkgs...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("testbin: go %s: %w (fix the build, or run with -short, which builds nothing)\n%s",
			strings.Join(args, " "), err, out)
	}
	return dir, nil
}

// Main is the TestMain of a package whose tests run the commands pkgs:
// unless -short, it builds them (Build, with race) and calls use with the
// directory; then it runs the tests through m (a *testing.M, or
// redistest.Shared's wrapper of one), removes the directory and checks
// for leaked goroutines. Under -short it builds nothing and use is not
// called, so the tests that need a binary skip: the fast loop builds no
// binaries.
func Main(m goleak.TestingM, race bool, use func(dir string), pkgs ...string) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		goleak.VerifyTestMain(m)
		return
	}
	dir, err := Build(race, pkgs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	use(dir)
	goleak.VerifyTestMain(cleanupM{m, dir})
}

// cleanupM removes the build directory once the tests ran, before goleak
// checks and exits.
type cleanupM struct {
	m   goleak.TestingM
	dir string
}

func (c cleanupM) Run() int {
	defer os.RemoveAll(c.dir)
	return c.m.Run()
}
