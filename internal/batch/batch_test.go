package batch

import (
	"fmt"
	"testing"
)

// What is queued when a batch starts goes in it, at most max at a time,
// in order; a value sent while a batch is flushed goes in the next; Drain
// returns once the channel is closed and empty.
func TestDrain(t *testing.T) {
	ch := make(chan int, 10)
	for i := range 5 {
		ch <- i
	}
	var got []string
	Drain(ch, 3, func(b []int) {
		got = append(got, fmt.Sprint(b))
		switch b[0] {
		case 0:
			ch <- 5 // behind 3 and 4, within the next batch's max
		case 3:
			close(ch)
		}
	})
	if fmt.Sprint(got) != "[[0 1 2] [3 4 5]]" {
		t.Fatalf("batches %v, want [[0 1 2] [3 4 5]]", got)
	}
}
