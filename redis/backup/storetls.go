package backup

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// A store pod serves HTTPS only, with a key pair the operator makes for that pod alone;
// the operator trusts that one certificate and no other (it is pinned: no CA, no name
// looked up), so the token and the backup's bytes cross the pod network encrypted, to the
// pod that was made for them. The pod gets the key pair through a Secret the operator
// writes before it (a Secret, not the pod's spec: reading the pod must show nothing
// usable), and the certificate's SHA-256 in its spec: a store that finds another
// certificate mounted refuses to start, rather than serve one the operator would refuse.

// StoreIdentity is what one store pod is made with: the token its clients show (the pod
// is given its digest only) and its TLS key pair (PEM).
type StoreIdentity struct {
	Token   string
	CertPEM []byte
	KeyPEM  []byte
}

// StoreServerName is the name in every store pod's certificate, which the operator asks
// for: the certificate is pinned, so the name needs not tell pods apart.
const StoreServerName = "redis-backup-store"

// StoreCertEnv gives the store server the SHA-256 (hex) of the certificate it must serve
// (the DER bytes).
const StoreCertEnv = "BACKUP_STORE_CERT_SHA256"

// NewStoreIdentity makes a random token and a self-signed ECDSA P-256 certificate for
// StoreServerName, valid ten years: it is trusted by pinning alone, for as long as the
// operator remembers it (one pod's life).
func NewStoreIdentity() (StoreIdentity, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return StoreIdentity{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return StoreIdentity{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return StoreIdentity{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: StoreServerName},
		DNSNames:     []string{StoreServerName},
		NotBefore:    now.Add(-time.Hour), // a node's clock a little behind
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return StoreIdentity{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return StoreIdentity{}, err
	}
	return StoreIdentity{
		Token:   hex.EncodeToString(raw),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// CertDigest is the hex SHA-256 of the DER certificate in certPEM, what a store pod is
// given in StoreCertEnv ("" for no certificate).
func CertDigest(certPEM []byte) string {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return ""
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:])
}

// pinnedTLS is a client's TLS configuration that trusts the certificate certPEM alone.
func pinnedTLS(certPEM []byte) (*tls.Config, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no certificate of the store pod to trust (a PEM certificate)")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the store pod's certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{RootCAs: pool, ServerName: StoreServerName, MinVersion: tls.VersionTLS13}, nil
}

// storeTLS is the store server's TLS configuration: the key pair in certFile and keyFile,
// which must be the certificate whose CertDigest is digest.
func storeTLS(certFile, keyFile, digest string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(pair.Certificate[0])
	if got := hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("the certificate in %s has SHA-256 %s, the pod was made for %s ($%s): a Secret changed after the pod was made; the pod ends and the operator makes a new one", certFile, got, digest, StoreCertEnv)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}, nil
}
