package redistest

import (
	"flag"
	"runtime"
	"strconv"
)

// DefaultParallel raises -test.parallel to n (or GOMAXPROCS, if higher)
// unless the command line set it; call it from TestMain before Run. It is
// for packages whose parallel tests mostly wait on real time (failovers,
// replicas, Cluster reconfiguration) rather than compute: go test's
// default of GOMAXPROCS runs only two of them at once on 2 cores, though
// the cores idle. It changes nothing for tests that are not t.Parallel.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set || flag.Lookup("test.parallel") == nil {
		return
	}
	flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
}
