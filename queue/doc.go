// Package queue is the client side of timerq: it schedules, inspects,
// cancels, reschedules and waits on durable timers kept in Redis.
package queue
