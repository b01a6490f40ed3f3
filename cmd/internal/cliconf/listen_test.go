package cliconf_test

import (
	"testing"

	"github.com/timerq/timerq/cmd/internal/cliconf"
)

// TestIsLoopback: only loopback addresses and localhost count; an empty
// host listens everywhere. This one check decides for the dashboard and
// for the HTTP API whether credentials are required.
func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.5.5.5:1": true, "[::1]:8080": true, "localhost:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "example.internal:8080": false,
	} {
		if got, err := cliconf.IsLoopback(addr); err != nil || got != want {
			t.Errorf("IsLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := cliconf.IsLoopback("nohostport"); err == nil {
		t.Error("IsLoopback(nohostport) is not an error")
	}
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.1:8080": true, "[::1]:8080": true, "localhost": true, "localhost:80": true,
		"rebind.attacker.example": false, "rebind.attacker.example:8080": false, "localhost.attacker.example": false, "10.0.0.1": false,
	} {
		if got := cliconf.IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
