// Package batch gathers what a channel holds into batches: the loops that
// acknowledge deliveries (queue.Consume's, the dispatcher's) send the first
// at once and those that queued meanwhile together in the next round trip.
package batch

// Drain calls flush with batches of what ch receives, until ch is closed
// and empty: each batch is the first value received and every value
// already queued behind it, at most max. flush must not keep the slice:
// the next batch reuses it.
func Drain[T any](ch <-chan T, max int, flush func([]T)) {
	b := make([]T, 0, max)
	for first := range ch {
		b = append(b[:0], first)
	fill:
		for len(b) < max {
			select {
			case v, ok := <-ch:
				if !ok {
					break fill
				}
				b = append(b, v)
			default:
				break fill
			}
		}
		flush(b)
	}
}
