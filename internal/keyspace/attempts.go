package keyspace

// Attempts is the list that keeps the last attempts to deliver timer id's
// fires to its endpoint (queue.Deliveries.Attempts), newest last, each a JSON
// object; the dispatcher appends, trims and sets its expiry in the
// pipeline that settles the delivery. It lives in the timer's shard, the
// slot of the fire stream the delivery comes from.
func (s Space) Attempts(id string) string { return s.tag + "attempts:" + id }
