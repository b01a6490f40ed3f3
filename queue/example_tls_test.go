package queue_test

import (
	"crypto/tls"
	"crypto/x509"
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// A Redis behind TLS with a private CA, requiring a client certificate
// (tls-auth-clients yes), as a Cluster. queue.New takes any
// redis.UniversalClient: TLS is the client's *tls.Config. Leave ServerName
// empty so that each node (each Sentinel, master and Cluster node) is
// checked against its own address; docs/security.md has the ACL user each
// role needs.
func Example_tls() {
	pem, err := os.ReadFile("/etc/timerq/ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		log.Fatal("ca.pem holds no certificate")
	}
	pair, err := tls.LoadX509KeyPair("/etc/timerq/client.pem", "/etc/timerq/client-key.pem")
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:     []string{"redis-1.internal:6380", "redis-2.internal:6380", "redis-3.internal:6380"},
		Username:  "timerq-app-orders",
		Password:  os.Getenv("REDIS_PASSWORD"),
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
	defer rdb.Close()
	q, err := queue.New(rdb, queue.Options{Namespace: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
}
