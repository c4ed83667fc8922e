package fence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// A sequencer is a fencing token signed by the lock service, so that a
// resource can check offline, with only the service's public keys, that the
// token was really issued for that resource. Without it a client could send
// Fencing-Token: 9223372036854775807 and raise a fence that no real holder can
// ever pass again. docs/sequencer.md is the language-neutral form of what
// follows, with test vectors in testdata/sequencer/vectors.json.
//
// # Format, version 1
//
// A sequencer is two unpadded base64url strings (RFC 4648 §5, no '=') joined by
// a dot, at most MaxSequencerLen bytes in all:
//
//	base64url(payload) "." base64url(signature)
//
// The payload is, in order (uvarint is unsigned LEB128 as in Protocol Buffers,
// in its shortest form):
//
//	version   1 byte, 0x01
//	kid       uvarint length, then 1..MaxKeyIDLen bytes of [A-Za-z0-9_-]
//	token     uvarint, 1..2^63-1
//	expires   uvarint, Unix time in milliseconds, 1..2^63-1; 0 means none is stated
//	resource  uvarint length, then the UTF-8 name (see ValidateResource)
//	holder    uvarint length, then the UTF-8 holder id (see ValidateHolder)
//
// and nothing after it. The signature is the 64-byte Ed25519 signature (RFC
// 8032, pure Ed25519) of the 12 ASCII bytes "fence-seq-v1", a zero byte, and
// the payload. A parser rejects anything else, including non-shortest varints,
// base64 with non-zero padding bits, and other characters, so each sequencer
// has exactly one encoding.
//
// # Expiry
//
// KeySet.Verify does not reject an expired sequencer. Staleness is decided by
// the fence (token >= last fence), not by clocks: a holder whose lease expired
// is stopped as soon as a newer holder writes, and until then its write is as
// safe as it would be without a sequencer. Rejecting on expiry would also make
// a store's answer to a retried write depend on when it arrives. Expires is
// there for logs and for callers that want a stricter policy of their own.

// Limits of the sequencer format, in bytes.
const (
	MaxSequencerLen = 2048 // the whole compact string
	MaxKeyIDLen     = 64   // a key id
)

// ErrInvalidSequencer means a sequencer is malformed, signed by an unknown key,
// badly signed, or not for the resource and token it was presented with.
// API code invalid_sequencer.
var ErrInvalidSequencer = errors.New("fence: invalid sequencer")

// Reasons that KeySet.Verify wraps together with ErrInvalidSequencer.
var (
	errMalformedSequencer = errors.New("malformed")
	errUnknownKey         = errors.New("unknown key id")
	errBadSignature       = errors.New("bad signature")
	errWrongResource      = errors.New("wrong resource")
	errWrongToken         = errors.New("wrong token")
)

const (
	sequencerVersion = 1
	sequencerContext = "fence-seq-v1\x00" // signed before the payload
	keyFilePrefix    = "fence-ed25519-v1:"
)

var seqBase64 = base64.RawURLEncoding.Strict()

// Sequencer is the content of a signed sequencer: the lock service's statement
// that Token was issued to Holder for Resource.
type Sequencer struct {
	Resource string
	Holder   string
	Token    Token
	Expires  time.Time // when the lease expired or expires, in milliseconds; zero means not stated
	KeyID    string    // the id of the key that signed it; SigningKey.Sign sets it
}

// SigningKey is the lock service's private Ed25519 key for signing sequencers.
// Its text form (MarshalText) is the content of a key file.
type SigningKey struct {
	ID      string // 1..MaxKeyIDLen bytes of [A-Za-z0-9_-]; GenerateSigningKey derives it from the public key
	Private ed25519.PrivateKey
}

// PublicKey is a key that verifies sequencers, as published by the lock
// service. Its JSON form is an RFC 8037 JWK:
// {"kty":"OKP","crv":"Ed25519","alg":"Ed25519","kid":ID,"x":base64url(Key)}.
type PublicKey struct {
	ID  string
	Key ed25519.PublicKey
}

// KeySet holds the public keys that a resource trusts, by key id. During a key
// rotation it holds the old and the new key; removing a key revokes every
// sequencer it signed.
type KeySet map[string]ed25519.PublicKey

// GenerateSigningKey returns a new random key whose ID is the unpadded
// base64url form of the first 8 bytes of the SHA-256 of its public key.
func GenerateSigningKey() (SigningKey, error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return SigningKey{}, fmt.Errorf("fence: generate signing key: %w", err)
	}
	sum := sha256.Sum256(pub)
	return SigningKey{ID: seqBase64.EncodeToString(sum[:8]), Private: priv}, nil
}

// Public returns the public half of k. Its Key is nil if k.Private is not an
// Ed25519 private key.
func (k SigningKey) Public() PublicKey {
	if len(k.Private) != ed25519.PrivateKeySize {
		return PublicKey{ID: k.ID}
	}
	return PublicKey{ID: k.ID, Key: k.Private.Public().(ed25519.PublicKey)}
}

// String returns the key id only, so that logging a SigningKey never shows the private key.
func (k SigningKey) String() string { return "fence.SigningKey{ID:" + k.ID + "}" }

// GoString is like String, for %#v.
func (k SigningKey) GoString() string { return k.String() }

// MarshalText returns the one-line key file form of k,
// "fence-ed25519-v1:" ID ":" base64url(32-byte seed), without a newline.
func (k SigningKey) MarshalText() ([]byte, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	return []byte(keyFilePrefix + k.ID + ":" + seqBase64.EncodeToString(k.Private.Seed())), nil
}

// UnmarshalText parses the form written by MarshalText. One trailing newline
// ("\n" or "\r\n") is allowed, so that key files may end in one.
func (k *SigningKey) UnmarshalText(text []byte) error {
	s := string(text)
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\r")
	rest, ok := strings.CutPrefix(s, keyFilePrefix)
	if !ok {
		return errors.New("fence: signing key: not a fence-ed25519-v1 key")
	}
	id, seed64, ok := strings.Cut(rest, ":")
	if !ok {
		return errors.New("fence: signing key: missing ':' after the key id")
	}
	if err := validateKeyID(id); err != nil {
		return fmt.Errorf("fence: signing key: %w", err)
	}
	seed, err := seqBase64.DecodeString(seed64)
	if err != nil || len(seed) != ed25519.SeedSize || !isBase64URL(seed64) {
		return fmt.Errorf("fence: signing key %q: the seed is not %d bytes of unpadded base64url", id, ed25519.SeedSize)
	}
	*k = SigningKey{ID: id, Private: ed25519.NewKeyFromSeed(seed)}
	return nil
}

func (k SigningKey) validate() error {
	if err := validateKeyID(k.ID); err != nil {
		return fmt.Errorf("fence: signing key: %w", err)
	}
	if len(k.Private) != ed25519.PrivateKeySize {
		return fmt.Errorf("fence: signing key %q: private key is %d bytes, want %d", k.ID, len(k.Private), ed25519.PrivateKeySize)
	}
	return nil
}

// Sign returns the sequencer string for s, signed by k, with s.KeyID set to
// k.ID. Expires is truncated to the millisecond. It returns an error if k is
// not a valid key, or an error wrapping ErrBadRequest or ErrInvalidToken if s
// has an invalid name, holder or token, or an Expires not after 1970.
func (k SigningKey) Sign(s Sequencer) (string, error) {
	if err := k.validate(); err != nil {
		return "", err
	}
	s.KeyID = k.ID
	payload, err := s.appendPayload(nil)
	if err != nil {
		return "", fmt.Errorf("fence: sign sequencer: %w", err)
	}
	sig := ed25519.Sign(k.Private, signedMessage(payload))
	return seqBase64.EncodeToString(payload) + "." + seqBase64.EncodeToString(sig), nil
}

// ParseSequencer decodes a sequencer string WITHOUT verifying its signature,
// for logs and tools. Never trust its result; use KeySet.Verify. It returns an
// error wrapping ErrInvalidSequencer unless s is exactly in the format
// described in this file.
func ParseSequencer(s string) (Sequencer, error) {
	seq, _, _, err := parseSequencer(s)
	return seq, err
}

// Verify checks that s is a sequencer signed by a key in ks for exactly
// resource and token, and returns its content. Otherwise it returns an error
// wrapping ErrInvalidSequencer that says which check failed: malformed, unknown
// key id, bad signature, wrong resource or wrong token. An expired sequencer
// is not rejected (see Expiry above). Verify is safe for concurrent use as
// long as ks is not modified.
func (ks KeySet) Verify(s string, resource string, token Token) (Sequencer, error) {
	seq, payload, sig, err := parseSequencer(s)
	if err != nil {
		return Sequencer{}, err
	}
	pub, ok := ks[seq.KeyID]
	if !ok || len(pub) != ed25519.PublicKeySize { // ed25519.Verify panics on other sizes
		return Sequencer{}, fmt.Errorf("%w: %w %q", ErrInvalidSequencer, errUnknownKey, seq.KeyID)
	}
	if !ed25519.Verify(pub, signedMessage(payload), sig) {
		return Sequencer{}, fmt.Errorf("%w: %w (key id %q)", ErrInvalidSequencer, errBadSignature, seq.KeyID)
	}
	// Only an authentic sequencer gets this far, so its claims may be quoted.
	if seq.Resource != resource {
		return seq, fmt.Errorf("%w: %w: signed for %q, presented for %q", ErrInvalidSequencer, errWrongResource, seq.Resource, resource)
	}
	if seq.Token != token {
		return seq, fmt.Errorf("%w: %w: signed for token %d, presented with %d", ErrInvalidSequencer, errWrongToken, seq.Token, token)
	}
	return seq, nil
}

// MarshalJSON implements json.Marshaler with the JWK form.
func (k PublicKey) MarshalJSON() ([]byte, error) {
	if err := validateKeyID(k.ID); err != nil {
		return nil, fmt.Errorf("fence: public key: %w", err)
	}
	if len(k.Key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("fence: public key %q is %d bytes, want %d", k.ID, len(k.Key), ed25519.PublicKeySize)
	}
	return json.Marshal(jwk{Kty: "OKP", Crv: "Ed25519", Alg: "Ed25519", Kid: k.ID, X: seqBase64.EncodeToString(k.Key)})
}

// UnmarshalJSON implements json.Unmarshaler. It requires kty "OKP", crv
// "Ed25519", a valid kid and a 32-byte x; alg may be absent, "Ed25519" or
// "EdDSA". It rejects a JWK that carries a private key ("d").
func (k *PublicKey) UnmarshalJSON(data []byte) error {
	var j jwk
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("fence: public key: %w", err)
	}
	switch {
	case j.Kty != "OKP" || j.Crv != "Ed25519":
		return fmt.Errorf("fence: public key %q: kty %q crv %q, want OKP Ed25519", j.Kid, j.Kty, j.Crv)
	case j.Alg != "" && j.Alg != "Ed25519" && j.Alg != "EdDSA":
		return fmt.Errorf("fence: public key %q: alg %q, want Ed25519", j.Kid, j.Alg)
	case j.D != nil:
		return fmt.Errorf("fence: public key %q: contains a private key", j.Kid)
	}
	if err := validateKeyID(j.Kid); err != nil {
		return fmt.Errorf("fence: public key: %w", err)
	}
	x, err := seqBase64.DecodeString(j.X)
	if err != nil || len(x) != ed25519.PublicKeySize || !isBase64URL(j.X) {
		return fmt.Errorf("fence: public key %q: x is not %d bytes of unpadded base64url", j.Kid, ed25519.PublicKeySize)
	}
	*k = PublicKey{ID: j.Kid, Key: ed25519.PublicKey(x)}
	return nil
}

type jwk struct {
	Kty string  `json:"kty"`
	Crv string  `json:"crv"`
	Alg string  `json:"alg,omitempty"`
	Kid string  `json:"kid"`
	X   string  `json:"x"`
	D   *string `json:"d,omitempty"`
}

func signedMessage(payload []byte) []byte {
	return append([]byte(sequencerContext), payload...)
}

// appendPayload appends the payload encoding of s to b after validating s.
// Its errors wrap ErrInvalidToken or ErrBadRequest, not ErrInvalidSequencer.
func (s Sequencer) appendPayload(b []byte) ([]byte, error) {
	if err := validateKeyID(s.KeyID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if !s.Token.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrInvalidToken, s.Token)
	}
	if err := ValidateResource(s.Resource); err != nil {
		return nil, err
	}
	if err := ValidateHolder(s.Holder); err != nil {
		return nil, err
	}
	var exp uint64
	if !s.Expires.IsZero() {
		ms := s.Expires.UnixMilli()
		if ms <= 0 {
			return nil, fmt.Errorf("%w: expires %s is not after 1970", ErrBadRequest, s.Expires)
		}
		exp = uint64(ms)
	}
	b = append(b, sequencerVersion)
	b = binary.AppendUvarint(b, uint64(len(s.KeyID)))
	b = append(b, s.KeyID...)
	b = binary.AppendUvarint(b, uint64(s.Token))
	b = binary.AppendUvarint(b, exp)
	b = binary.AppendUvarint(b, uint64(len(s.Resource)))
	b = append(b, s.Resource...)
	b = binary.AppendUvarint(b, uint64(len(s.Holder)))
	b = append(b, s.Holder...)
	return b, nil
}

// parseSequencer decodes s into its content, its payload and its signature.
// It checks the format only, not the signature.
func parseSequencer(s string) (seq Sequencer, payload, sig []byte, err error) {
	malformed := func(format string, args ...any) (Sequencer, []byte, []byte, error) {
		return Sequencer{}, nil, nil, fmt.Errorf("%w: %w: %s", ErrInvalidSequencer, errMalformedSequencer, fmt.Sprintf(format, args...))
	}
	if len(s) > MaxSequencerLen {
		return malformed("%d bytes, more than %d", len(s), MaxSequencerLen)
	}
	p64, sig64, ok := strings.Cut(s, ".")
	// The base64 decoder skips '\r' and '\n', so check the alphabet first.
	if !ok || !isBase64URL(p64) || !isBase64URL(sig64) {
		return malformed("not base64url(payload) \".\" base64url(signature)")
	}
	if payload, err = seqBase64.DecodeString(p64); err != nil {
		return malformed("payload: %v", err)
	}
	if sig, err = seqBase64.DecodeString(sig64); err != nil || len(sig) != ed25519.SignatureSize {
		return malformed("signature is not %d bytes of base64url", ed25519.SignatureSize)
	}
	d := seqDecoder{b: payload}
	if v := d.byte(); v != sequencerVersion {
		return malformed("version %d, want %d", v, sequencerVersion)
	}
	seq.KeyID = string(d.bytes(MaxKeyIDLen))
	seq.Token = Token(d.uvarint())
	exp := d.uvarint()
	seq.Resource = string(d.bytes(MaxNameLen))
	seq.Holder = string(d.bytes(MaxHolderLen))
	switch {
	case d.err != nil:
		return malformed("payload: %v", d.err)
	case len(d.b) != 0:
		return malformed("%d bytes after the payload", len(d.b))
	case exp > math.MaxInt64:
		return malformed("expires %d out of range", exp)
	}
	if exp != 0 {
		seq.Expires = time.UnixMilli(int64(exp)).UTC()
	}
	// appendPayload validates every field; comparing its output with the
	// input also rejects varints that are not in their shortest form.
	// Its error is quoted with %v: a bad name in a sequencer is an invalid
	// sequencer, not a bad request or an invalid token.
	again, err := seq.appendPayload(make([]byte, 0, len(payload)))
	if err != nil {
		return malformed("%v", err)
	}
	if !bytes.Equal(again, payload) {
		return malformed("payload is not in canonical form")
	}
	return seq, payload, sig, nil
}

// seqDecoder reads the payload; after the first error every read returns zero.
type seqDecoder struct {
	b   []byte
	err error
}

func (d *seqDecoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail(errors.New("truncated"))
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *seqDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errors.New("truncated or overflowing varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *seqDecoder) bytes(maxLen int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(maxLen) || n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("field of %d bytes: longer than %d or truncated", n, maxLen))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *seqDecoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func validateKeyID(id string) error {
	if len(id) == 0 || len(id) > MaxKeyIDLen || !isBase64URL(id) {
		return fmt.Errorf("key id %q is not 1..%d characters of [A-Za-z0-9_-]", id, MaxKeyIDLen)
	}
	return nil
}

// isBase64URL reports whether s has only characters of the base64url alphabet.
func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
