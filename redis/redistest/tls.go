package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// CA is a certificate authority made for a test: it issues the instances' certificates
// in the cert-manager Secret layout (tls.crt, tls.key, ca.crt).
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// serials gives every certificate of a test run its own serial number, so a test can
// tell a renewed certificate from the one before.
var serials atomic.Int64

// NewCA makes a self-signed CA valid for a day.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: "redis-cluster-operator test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a certificate for both server and client use, as one cert-manager
// Certificate of a Redis cluster is used, with a serial number no other certificate of
// the run has; its DNS SANs are commonName and moreNames. It returns the Secret data:
// tls.crt, tls.key and ca.crt.
func (ca *CA) Issue(commonName string, moreNames ...string) (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1000 + serials.Add(1)),
		Subject:      pkix.Name{CommonName: commonName},
		DNSNames:     append([]string{commonName}, moreNames...),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(12 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  ca.certPEM,
	}, nil
}

// WriteTLSDir writes the Secret data into dir as files, as a Secret volume holds them.
func WriteTLSDir(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range data {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("failed to write %s: %w", name, err)
		}
	}
	return nil
}

// ClientConfig is a client configuration trusting only the CA and presenting a
// certificate of it, for tests that talk to TLS servers.
func ClientConfig(data map[string][]byte) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(data["tls.crt"], data["tls.key"])
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if len(leaf.DNSNames) == 0 {
		return nil, fmt.Errorf("the certificate names no host")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(data["ca.crt"])
	// The servers present the same certificate: its name is the one to check.
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: leaf.DNSNames[0], MinVersion: tls.VersionTLS12}, nil
}
