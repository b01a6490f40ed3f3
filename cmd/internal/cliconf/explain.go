package cliconf

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/aclright"
	"github.com/timerq/timerq/queue"
)

// Target is what a failed command was talking to, for the hints.
type Target struct {
	Redis     string        // --redis, redacted
	Namespace string        // the namespace (or namespaces) in use
	Timeout   time.Duration // the per-command timeout, if the binary has one
	// Retention names the flag that shortens retention, where the binary
	// has one ("--retention" in timerworker); empty otherwise.
	Retention string
}

// Explain maps an error from Redis or from package queue to an exit code
// and a hint that fits its cause. An *Error passes through unchanged; so do
// the sentinels a binary explains itself (not found, conflicts, bad input),
// which Explain returns with the exit code they carry but the queue's own
// text. Only a connection failure gets "check that Redis is reachable".
func Explain(err error, t Target) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	msg := strings.TrimPrefix(err.Error(), "timerq: ")
	// queue's messages end in "; <what to do>" when they know it.
	problem, fix := msg, ""
	if i := strings.LastIndex(msg, "; "); i >= 0 {
		problem, fix = msg[:i], msg[i+2:]
	}
	out := func(code int, problem, fix string) *Error {
		return &Error{Code: code, Problem: problem, Fix: fix, Err: err}
	}
	ns := t.Namespace
	switch {
	case errors.Is(err, context.Canceled):
		return out(ExitFailure, "interrupted", "run the command again to finish it")
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrEndpointNotFound), errors.Is(err, queue.ErrRecurringNotFound),
		errors.Is(err, queue.ErrCancelJobNotFound):
		return out(ExitNotFound, problem, fix)
	case errors.Is(err, queue.ErrAlreadyFired), errors.Is(err, queue.ErrCancelled):
		return out(ExitConflict, problem, fix)
	case errors.Is(err, queue.ErrInvalidID), errors.Is(err, queue.ErrInvalidDue), errors.Is(err, queue.ErrInvalidEndpoint),
		errors.Is(err, queue.ErrPayloadTooLarge), errors.Is(err, queue.ErrInvalidOptions), errors.Is(err, queue.ErrInvalidFilter):
		return out(ExitUsage, problem, fix)
	case errors.Is(err, queue.ErrInvalidNamespace):
		return out(ExitUsage, problem, "fix --namespace (TIMERQ_NAMESPACE): "+fix)
	case errors.Is(err, queue.ErrPermission) || redis.HasErrorPrefix(err, "NOPERM"):
		if !strings.Contains(problem, "(missing right: ") { // queue names it; raw replies do not
			problem += " (missing right: " + aclright.Missing(replyText(err), ns) + ")"
		}
		if !strings.Contains(msg, "docs/security.md") { // a reply that did not pass through queue, which hints
			fix = "docs/security.md lists the rights of each role"
		}
		return out(ExitFailure, problem, fix)
	// The queue's message carries the hint for these, in the library's
	// words: flagNames renames its Go settings for the command line.
	case errors.Is(err, queue.ErrOutOfMemory), errors.Is(err, queue.ErrWrongType), errors.Is(err, queue.ErrClusterDown):
		return out(ExitFailure, problem, flagNames(t).Replace(fix))
	case errors.Is(err, queue.ErrMalformedRecord):
		return out(ExitFailure, problem, fmt.Sprintf("something other than timerq wrote that timer's field in timerq:{%s}:timers; delete the field (HDEL) or use another --namespace", ns))
	case errors.Is(err, context.DeadlineExceeded):
		wait := ""
		if t.Timeout > 0 {
			wait = fmt.Sprintf(" within --timeout %v", t.Timeout)
		}
		fix := "check that Redis is reachable and not overloaded (SLOWLOG GET), or raise --timeout"
		if strings.HasPrefix(t.Redis, "rediss://") {
			// A plain server reads a TLS hello as a command, and waits.
			fix += "; if that port does not speak TLS, use redis://"
		}
		return out(ExitFailure, fmt.Sprintf("Redis at %s did not answer%s", t.Redis, wait), fix)
	}
	if ex := explainTLS(err, msg, t); ex != nil {
		return ex
	}
	if ex := explainReply(err, msg, t); ex != nil {
		return ex
	}
	if errors.Is(err, queue.ErrOutcomeUnknown) {
		return out(ExitFailure, fmt.Sprintf("the reply from Redis at %s was lost, so the timer may or may not have been written: %s", t.Redis, msg),
			"run the same command again, with the same ID: scheduling is idempotent, so a timer that was written is reported as existing and is not scheduled twice")
	}
	if queue.Disconnected(err) && strings.HasPrefix(t.Redis, "rediss://") && closedAfterHandshake(msg) {
		// Under TLS 1.3 the client's handshake ends before the server
		// checks the client certificate, so a server with
		// tls-auth-clients yes refuses a missing or foreign one by closing
		// the connection: the client sees a reset or an EOF, not the alert.
		return out(ExitFailure, fmt.Sprintf("Redis at %s closed the TLS connection: %s", t.Redis, msg),
			"if the server requires client certificates (tls-auth-clients yes), pass one signed by a CA in its tls-ca-cert-file with --tls-cert-file and --tls-key-file (TIMERQ_TLS_CERT_FILE, TIMERQ_TLS_KEY_FILE); otherwise check that Redis is reachable there and not restarting")
	}
	if queue.Disconnected(err) {
		return out(ExitFailure, fmt.Sprintf("cannot reach Redis at %s: %s", t.Redis, msg),
			"check that Redis is reachable there and that --redis (TIMERQ_REDIS_URL) is right; if that port speaks TLS only, use rediss://")
	}
	return out(ExitFailure, problem, cmp.Or(fix, "this is unexpected: report it, with the message above, to the timerq maintainers"))
}

// flagNames renames, for t's binary, the library's Go settings that the
// queue's hints name.
func flagNames(t Target) *strings.Replacer {
	retention := "shorten timerworker's --retention"
	if t.Retention != "" {
		retention = "shorten " + t.Retention
	}
	return strings.NewReplacer("lower Options.Retention", retention, "another namespace", "another --namespace")
}

// closedAfterHandshake reports whether msg is the server closing or
// resetting a connection, rather than refusing or not answering it.
func closedAfterHandshake(msg string) bool {
	return strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "broken pipe") ||
		strings.HasSuffix(msg, "EOF")
}

// replyText is the Redis error reply inside err, or err's text.
func replyText(err error) string {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return rerr.Error()
	}
	return err.Error()
}

// explainTLS explains handshake failures, each by the flag that fixes it.
func explainTLS(err error, msg string, t Target) *Error {
	out := func(problem, fix string) *Error {
		return &Error{Code: ExitFailure, Problem: fmt.Sprintf("TLS with Redis at %s failed: %s", t.Redis, problem), Fix: fix, Err: err}
	}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var rec tls.RecordHeaderError
	var invalid x509.CertificateInvalidError
	var alert tls.AlertError
	switch {
	case errors.As(err, &unknown) || strings.Contains(msg, "certificate signed by unknown authority"):
		return out("the server's certificate is signed by a CA this machine does not trust",
			"pass the PEM file of the CA that signed it with --tls-ca-file (TIMERQ_TLS_CA_FILE)")
	case errors.As(err, &host):
		return out(msg, "connect by a name the certificate lists, or give the name to check with --tls-server-name (TIMERQ_TLS_SERVER_NAME)")
	case errors.As(err, &invalid):
		return out(msg, "renew the server's certificate, or check this machine's clock")
	case errors.As(err, &rec) || strings.Contains(msg, "first record does not look like a TLS handshake"):
		return out("the server does not speak TLS on that port",
			"use redis:// instead of rediss://, or the server's tls-port")
	case errors.As(err, &alert) || strings.Contains(msg, "remote error: tls:"):
		switch {
		case strings.Contains(msg, "certificate required"):
			return out("the server requires a client certificate (tls-auth-clients yes)",
				"pass one with --tls-cert-file and --tls-key-file (TIMERQ_TLS_CERT_FILE, TIMERQ_TLS_KEY_FILE)")
		case strings.Contains(msg, "unknown certificate authority"), strings.Contains(msg, "bad certificate"):
			return out("the server rejected the client certificate ("+msg+")",
				"pass a --tls-cert-file signed by a CA in the server's tls-ca-cert-file, with its --tls-key-file")
		}
		return out(msg, "check the server's TLS settings (tls-protocols, tls-ciphers) against TLS 1.2 or later")
	}
	return nil
}

// explainReply explains the error replies of Redis that an operator can fix.
func explainReply(err error, msg string, t Target) *Error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	out := func(problem, fix string) *Error {
		return &Error{Code: ExitFailure, Problem: problem, Fix: fix, Err: err}
	}
	switch {
	case (redis.HasErrorPrefix(err, "WRONGPASS") || redis.HasErrorPrefix(err, "NOAUTH") ||
		strings.Contains(msg, "invalid username-password")) && strings.Contains(t.Redis, "master_name="):
		// go-redis gives a Sentinel URL's user:password@ to the Sentinels
		// only; the master's credentials are query parameters.
		return out(fmt.Sprintf("Redis at %s refused the credentials (%s)", t.Redis, msg),
			"in a Sentinel URL, user:password@ is for the Sentinels; give the master's as &username=USER&password=PASS, e.g. redis://sentinel:26379/0?master_name=mymaster&username=timerq&password=secret")
	case redis.HasErrorPrefix(err, "WRONGPASS") || strings.Contains(msg, "invalid username-password"):
		return out(fmt.Sprintf("Redis at %s rejected the username or password", t.Redis),
			"correct the credentials in --redis (TIMERQ_REDIS_URL), e.g. rediss://user:password@host:6379/0")
	case redis.HasErrorPrefix(err, "NOAUTH"):
		return out(fmt.Sprintf("Redis at %s requires a password", t.Redis),
			"put the user and password in --redis (TIMERQ_REDIS_URL), e.g. redis://user:password@host:6379/0")
	case strings.Contains(msg, "without any password configured"):
		return out(fmt.Sprintf("Redis at %s has no password, but --redis gives one", t.Redis),
			"remove the password from --redis, or configure requirepass on the server")
	case strings.Contains(msg, "MOVED ") || strings.Contains(msg, "ASK ") || strings.Contains(msg, "CLUSTERDOWN"):
		return out(fmt.Sprintf("Redis at %s is a Cluster node, and --redis treats it as a single server (%s)", t.Redis, msg),
			"add ?cluster=1 to --redis, or list the nodes: redis://node1:6379?addr=node2:6379&addr=node3:6379")
	case redis.HasErrorPrefix(err, "READONLY"):
		return out(fmt.Sprintf("Redis at %s is a read-only replica", t.Redis),
			"point --redis at the master, or use a Sentinel URL (?master_name=NAME) that follows failovers")
	case redis.HasErrorPrefix(err, "LOADING"):
		return out(fmt.Sprintf("Redis at %s is loading its data set", t.Redis), "retry in a moment")
	case strings.Contains(strings.ToLower(msg), "unknown command"):
		return out(msg, "the server is older than timerq needs or renames that command; docs/security.md lists the minimum Redis version by feature")
	}
	return out(strings.TrimPrefix(msg, "timerq: "), "Redis refused the command; see its reply above and docs/operations.md")
}
