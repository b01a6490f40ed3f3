package queue

import "github.com/redis/go-redis/v9"

// ParseFireEntry parses a fire stream entry as a consumer sees it.
func ParseFireEntry(m redis.XMessage) (Event, error) { return parseEvent(m, 1) }
