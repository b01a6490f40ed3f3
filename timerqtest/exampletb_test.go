package timerqtest_test

import (
	"context"
	"fmt"
	"testing"
)

// exampleTB stands in for the *testing.T that a test has and an example
// lacks: it prints failures, and runs the cleanups when the example ends.
type exampleTB struct {
	testing.TB // nil: calling a method not below panics
	cleanups   []func()
}

func newExampleTB() *exampleTB { return &exampleTB{} }

func (t *exampleTB) Helper()                      {}
func (t *exampleTB) Logf(string, ...any)          {}
func (t *exampleTB) Errorf(f string, args ...any) { fmt.Printf("FAIL: "+f+"\n", args...) }
func (t *exampleTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (t *exampleTB) FailNow()                     { panic("FailNow") }
func (t *exampleTB) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) Context() context.Context     { return context.Background() }
func (t *exampleTB) Name() string                 { return "Example" }
func (t *exampleTB) Failed() bool                 { return false }
func (t *exampleTB) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
