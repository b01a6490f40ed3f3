package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority for TLS tests, its files in a
// temporary directory: a private CA, as companies run, whose certificate
// no system trust store holds.
type PKI struct {
	t      testing.TB
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAFile string // the CA certificate, PEM
	serial int64
}

// NewPKI creates a CA valid for one hour.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{t: t, dir: t.TempDir(), serial: 1}
	key := p.key()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial),
		Subject:               pkix.Name{CommonName: "timerq test CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("redistest: CA: %v", err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CAFile = p.write("ca.pem", "CERTIFICATE", der)
	return p
}

func (p *PKI) key() *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatalf("redistest: key: %v", err)
	}
	return key
}

func (p *PKI) write(name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatalf("redistest: %v", err)
	}
	return path
}

// Issue signs a certificate named name for hosts (IP addresses or DNS
// names; none for a client certificate) and returns its certificate and
// key files. It is good for both server and client authentication, as a
// Cluster node's is: nodes present it to each other on the bus.
func (p *PKI) Issue(name string, hosts ...string) (certFile, keyFile string) {
	p.t.Helper()
	p.serial++
	key := p.key()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatalf("redistest: certificate %s: %v", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.t.Fatalf("redistest: %v", err)
	}
	return p.write(name+".pem", "CERTIFICATE", der), p.write(name+"-key.pem", "EC PRIVATE KEY", kder)
}

// ServerTLS issues a server certificate for hosts and a client
// certificate, and returns the TLS config of a server that uses them;
// authClients requires the client certificate (mutual TLS).
func (p *PKI) ServerTLS(authClients bool, hosts ...string) *TLS {
	p.t.Helper()
	cert, key := p.Issue("server-"+hosts[0], hosts...)
	ccert, ckey := p.Issue("client")
	name := ""
	if net.ParseIP(hosts[0]) == nil {
		name = hosts[0] // a certificate without the address dialled
	}
	return &TLS{CAFile: p.CAFile, CertFile: cert, KeyFile: key, AuthClients: authClients,
		ClientCertFile: ccert, ClientKeyFile: ckey, ServerName: name}
}
