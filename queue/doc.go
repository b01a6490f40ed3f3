// Package queue is the client side of timerq: it schedules, inspects,
// cancels, reschedules and waits on durable timers kept in Redis.
//
// # Shards
//
// A namespace has a fixed number of shards, each one Redis Cluster hash
// tag, so one namespace can spread over a Cluster's masters while every
// script still touches one slot. Create a sharded namespace before first
// use with CreateNamespace (or `timerctl namespace create NS --shards N`);
// a namespace never created has DefaultShards (one), the layout timerq
// has always had. A Queue reads the count from Redis on first use, and
// Options.Shards, when set, must agree (ErrShardMismatch otherwise).
//
// A timer's shard is a fixed function of its ID, so Get, Cancel,
// Reschedule, FireNow and Wait go straight to it; ScheduleBatch makes one
// script call per shard in one pipeline; List, Stats, Purge and Claim visit
// every shard. Pollers (package poller) share the shards among themselves.
// docs/redis-layout.md has the key layout and the shard function.
package queue
