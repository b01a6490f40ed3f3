package cliconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/cmd/internal/redisurl"
	"github.com/timerq/timerq/queue"
)

// DefaultRedisURL is --redis's default in both binaries.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// Names of the connection flags, shared by both binaries.
const (
	FlagRedis              = "redis"
	FlagTLSCAFile          = "tls-ca-file"
	FlagTLSCertFile        = "tls-cert-file"
	FlagTLSKeyFile         = "tls-key-file"
	FlagTLSServerName      = "tls-server-name"
	FlagTLSInsecureSkipVfy = "tls-insecure-skip-verify"
)

// ConnFlags returns the connection flags, fresh on every call (urfave/cli
// flags carry parse state): --redis and the five --tls-* flags, each with
// its TIMERQ_* environment variable.
func ConnFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: FlagRedis, Value: DefaultRedisURL, EnvVars: []string{"TIMERQ_REDIS_URL", "TIMERQ_REDIS"},
			Usage: "Redis `URL`: redis://[user:password@]host:port/db, rediss:// (TLS), unix:///path, Sentinel (?master_name=NAME&addr=host:port...) or Cluster (?addr=host2:port... or ?cluster=1)"},
		&cli.StringFlag{Name: FlagTLSCAFile, EnvVars: []string{"TIMERQ_TLS_CA_FILE"},
			Usage: "trust the CA certificates in `PEM` file instead of the system's (needs rediss://)"},
		&cli.StringFlag{Name: FlagTLSCertFile, EnvVars: []string{"TIMERQ_TLS_CERT_FILE"},
			Usage: "client certificate `PEM` for mutual TLS (with --tls-key-file)"},
		&cli.StringFlag{Name: FlagTLSKeyFile, EnvVars: []string{"TIMERQ_TLS_KEY_FILE"},
			Usage: "private key `PEM` of --tls-cert-file"},
		&cli.StringFlag{Name: FlagTLSServerName, EnvVars: []string{"TIMERQ_TLS_SERVER_NAME"},
			Usage: "check every server's certificate against `NAME` instead of the host it is dialled by (default: each node's own host, also on Sentinel and Cluster)"},
		&cli.BoolFlag{Name: FlagTLSInsecureSkipVfy, EnvVars: []string{"TIMERQ_TLS_INSECURE_SKIP_VERIFY"},
			Usage: "do not verify the server's certificate: anyone on the path can read and change the traffic; for tests only"},
	}
}

// TLS is the --tls-* flags.
type TLS struct {
	CAFile, CertFile, KeyFile, ServerName string
	InsecureSkipVerify                    bool
}

// IsZero reports whether no --tls-* flag is set.
func (t TLS) IsZero() bool { return t == TLS{} }

// Conn is the connection flags of one command line.
type Conn struct {
	RedisURL string
	TLS      TLS
}

// ConnFrom reads the connection flags of c. An empty --redis (an env var
// set to "") means the default.
func ConnFrom(c *cli.Context) Conn {
	u := c.String(FlagRedis)
	if u == "" {
		u = DefaultRedisURL
	}
	return Conn{RedisURL: u, TLS: TLS{
		CAFile: c.String(FlagTLSCAFile), CertFile: c.String(FlagTLSCertFile), KeyFile: c.String(FlagTLSKeyFile),
		ServerName: c.String(FlagTLSServerName), InsecureSkipVerify: c.Bool(FlagTLSInsecureSkipVfy),
	}}
}

// Redacted is --redis without its password, for messages.
func (c Conn) Redacted() string { return redisurl.Redact(c.RedisURL) }

// Warnings returns what the binaries must say loudly at start:
// --tls-insecure-skip-verify, which turns off the one check that makes TLS
// worth having.
func (c Conn) Warnings() []string {
	if c.TLS.InsecureSkipVerify {
		return []string{"INSECURE: --tls-insecure-skip-verify (TIMERQ_TLS_INSECURE_SKIP_VERIFY) is set: the Redis server's certificate is not verified, so anyone on the network path can impersonate it and read or change every timer; use --tls-ca-file instead"}
	}
	return nil
}

// Options parses --redis and applies the --tls-* flags, returning options
// for redis.NewUniversalClient. Its errors are usage errors (*Error with
// ExitUsage) that never contain the password.
//
// With TLS, the certificate's name is checked per connection against the
// host that connection dials (tls.Config.ServerName left empty, which
// crypto/tls fills from the dialled address): so each Sentinel, master and
// Cluster node is checked against its own name, not against the first
// host of the URL as go-redis's URL parsers would. --tls-server-name
// overrides that with one name for every node.
func (c Conn) Options() (*redis.UniversalOptions, error) {
	opts, err := redisurl.Parse(c.RedisURL)
	if err != nil {
		var e *redisurl.Error
		if errors.As(err, &e) {
			return nil, &Error{Code: ExitUsage, Problem: e.Problem, Fix: e.Fix, Err: err}
		}
		return nil, &Error{Code: ExitUsage, Problem: err.Error(), Fix: "fix --redis (TIMERQ_REDIS_URL)", Err: err}
	}
	if opts.TLSConfig == nil {
		if !c.TLS.IsZero() {
			return nil, Usage(fmt.Sprintf("--tls-* flags are set but --redis %s does not use TLS", c.Redacted()),
				"use the rediss:// scheme for TLS, or unset the --tls-* flags (TIMERQ_TLS_*)")
		}
		return opts, nil
	}
	cfg, err := c.TLS.Config()
	if err != nil {
		return nil, err
	}
	// The URL's own skip_verify=true parameter still counts.
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || opts.TLSConfig.InsecureSkipVerify
	opts.TLSConfig = cfg
	return opts, nil
}

// Config builds the tls.Config the flags describe: TLS 1.2 or later, the
// CA file's certificates as the only roots when given, the client key pair
// when given, and ServerName empty unless --tls-server-name is set (see
// Conn.Options).
func (t TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &Error{Code: ExitUsage, Problem: fmt.Sprintf("--tls-ca-file %q cannot be read: %v", t.CAFile, unwrapPath(err)),
				Fix: "pass the PEM file of the CA that signed the Redis server's certificate", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, Usage(fmt.Sprintf("--tls-ca-file %q holds no PEM certificate", t.CAFile),
				"pass the CA certificate in PEM form (a file starting with -----BEGIN CERTIFICATE-----)")
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &Error{Code: ExitUsage, Problem: fmt.Sprintf("--tls-cert-file %q with --tls-key-file %q: %v", t.CertFile, t.KeyFile, unwrapPath(err)),
				Fix: "pass the client certificate and its own private key, both PEM", Err: err}
		}
		cfg.Certificates = []tls.Certificate{pair}
	case t.CertFile != "":
		return nil, Usage("--tls-cert-file is set without --tls-key-file", "pass the certificate's private key with --tls-key-file (TIMERQ_TLS_KEY_FILE)")
	case t.KeyFile != "":
		return nil, Usage("--tls-key-file is set without --tls-cert-file", "pass the client certificate with --tls-cert-file (TIMERQ_TLS_CERT_FILE)")
	}
	return cfg, nil
}

// unwrapPath drops the *PathError's repetition of the path we print.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// NewClient builds the Redis client of every timerq binary (timerworker,
// timerctl and its dashboard): standalone, Sentinel or Cluster as
// opts say, as redis.NewUniversalClient does. A Cluster client also
// re-reads its slot map every queue.ClusterStateReloadInterval and at once
// after a connection error or CLUSTERDOWN (queue.ReloadOnFailover), so a
// master failover stalls its shards for about a second after the
// promotion instead of go-redis's 60 s.
func NewClient(opts *redis.UniversalOptions) redis.UniversalClient {
	if opts.MasterName == "" && (len(opts.Addrs) > 1 || opts.IsClusterMode) {
		co := opts.Cluster()
		co.ClusterStateReloadInterval = queue.ClusterStateReloadInterval
		rdb := redis.NewClusterClient(co)
		queue.ReloadOnFailover(rdb)
		return rdb
	}
	return redis.NewUniversalClient(opts)
}
