package keyspace

// Debounce is the string that holds debounce key key's open window
// (scripts/lua/debounce.lua): "<opened_ms>:<deadline_ms>", the window's
// timer being "<key>@<opened_ms>". It lives in the shard of key
// (ScheduleShard), where ShardOf puts that timer too, and expires at the
// window's deadline, so an idle key costs nothing.
func (s Space) Debounce(key string) string { return s.tag + "debounce:" + key }
