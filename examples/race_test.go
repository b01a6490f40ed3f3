//go:build race

package examples_test

// raceEnabled makes the examples be built with -race when the test is.
const raceEnabled = true
