package fence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The language-neutral test vectors of the sequencer format, version 1, that
// docs/sequencer.md describes. TestSequencerVectors fails unless the file is
// exactly what generateSequencerVectors produces, so the file cannot drift
// from the generator; regenerate it with
//
//	go test -run TestSequencerVectors -update-vectors .
//
// The generator signs valid vectors with SigningKey.Sign. It builds the
// malformed ones byte by byte with its own encoder (vecPayload and friends),
// and signs them with a key of the key set, so that a parser that lets a
// defect through is caught by a signature that verifies.

// update makes TestSequencerVectors rewrite the vectors file before it checks it.
var update = flag.Bool("update-vectors", false, "rewrite "+vectorsPath+" from the generator in sequencer_vectors_test.go")

const (
	vectorsPath   = "testdata/sequencer/vectors.json"
	vectorsFormat = "fence sequencer v1 test vectors"
	vecContext    = "fence-seq-v1\x00" // written out again here, not taken from sequencerContext
)

type vectorFile struct {
	Format   string           `json:"format"`
	Keys     []vectorKey      `json:"keys"`
	Valid    []validVector    `json:"valid"`
	Invalid  []invalidVector  `json:"invalid"`
	Mismatch []mismatchVector `json:"mismatch"`
}

type vectorKey struct {
	Kid          string          `json:"kid"`
	JWK          json.RawMessage `json:"jwk"`
	PublicKeyHex string          `json:"public_key_hex"`
}

type validVector struct {
	Name         string `json:"name"`
	Sequencer    string `json:"sequencer"`
	Kid          string `json:"kid"`
	Token        string `json:"token"`
	ExpiresMS    string `json:"expires_ms"`
	Resource     string `json:"resource"`
	Holder       string `json:"holder"`
	PayloadHex   string `json:"payload_hex"`
	SignatureHex string `json:"signature_hex"`
}

type invalidVector struct {
	Name      string `json:"name"`
	Sequencer string `json:"sequencer"`
	Reason    string `json:"reason"`
	Stage     string `json:"stage"` // "parse" or "verify"
}

type mismatchVector struct {
	Name      string `json:"name"`
	Sequencer string `json:"sequencer"`
	Resource  string `json:"resource"`
	Token     string `json:"token"`
}

// TestSequencerVectors checks that the vectors file is what the generator
// produces, and that ParseSequencer and KeySet.Verify agree with every vector
// in the file on disk.
func TestSequencerVectors(t *testing.T) {
	path := filepath.FromSlash(vectorsPath)
	want := generateSequencerVectors(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestSequencerVectors -update-vectors . writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the generator produces (they differ from byte %d); if the generator is right, run go test -run TestSequencerVectors -update-vectors . and review the diff",
			vectorsPath, firstDifference(got, want))
	}

	vf := decodeVectorFile(t, got)
	ks := vectorKeySet(t, vf.Keys)
	names := map[string]bool{}
	name := func(t *testing.T, n string) {
		t.Helper()
		if n == "" || names[n] {
			t.Errorf("vector name %q is empty or not unique", n)
		}
		names[n] = true
	}

	t.Run("Valid", func(t *testing.T) {
		for _, v := range vf.Valid {
			name(t, v.Name)
			checkValidVector(t, ks, v)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		for _, v := range vf.Invalid {
			name(t, v.Name)
			checkInvalidVector(t, ks, v)
		}
	})
	t.Run("Mismatch", func(t *testing.T) {
		for _, v := range vf.Mismatch {
			name(t, v.Name)
			checkMismatchVector(t, ks, v)
		}
	})
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// decodeVectorFile decodes data strictly: a member that the shape does not
// have is an error, so the file and this test cannot disagree on the shape.
func decodeVectorFile(t *testing.T, data []byte) vectorFile {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var vf vectorFile
	if err := dec.Decode(&vf); err != nil {
		t.Fatalf("%s: %v", vectorsPath, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("%s: data after the JSON object", vectorsPath)
	}
	if vf.Format != vectorsFormat {
		t.Fatalf("%s: format %q, want %q", vectorsPath, vf.Format, vectorsFormat)
	}
	if len(vf.Keys) == 0 || len(vf.Valid) == 0 || len(vf.Invalid) == 0 || len(vf.Mismatch) == 0 {
		t.Fatalf("%s: a list is empty", vectorsPath)
	}
	return vf
}

// vectorKeySet checks the keys of the file and returns them as a KeySet.
func vectorKeySet(t *testing.T, keys []vectorKey) KeySet {
	t.Helper()
	ks := KeySet{}
	for _, k := range keys {
		var pub PublicKey
		if err := json.Unmarshal(k.JWK, &pub); err != nil {
			t.Fatalf("key %q: %v", k.Kid, err)
		}
		raw, err := hex.DecodeString(k.PublicKeyHex)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			t.Fatalf("key %q: public_key_hex %q is not %d bytes of hex", k.Kid, k.PublicKeyHex, ed25519.PublicKeySize)
		}
		if pub.ID != k.Kid || !pub.Key.Equal(ed25519.PublicKey(raw)) {
			t.Fatalf("key %q: the JWK is key %q %x, want %q %s", k.Kid, pub.ID, pub.Key, k.Kid, k.PublicKeyHex)
		}
		// The JWK is exactly what PublicKey marshals to, as GET /v1/keys serves it.
		served, err := json.Marshal(pub)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, k.JWK); err != nil || !bytes.Equal(compact.Bytes(), served) {
			t.Fatalf("key %q: JWK %s, want %s", k.Kid, compact.Bytes(), served)
		}
		if _, dup := ks[k.Kid]; dup {
			t.Fatalf("key %q is listed twice", k.Kid)
		}
		ks[k.Kid] = pub.Key
	}
	return ks
}

func checkValidVector(t *testing.T, ks KeySet, v validVector) {
	t.Helper()
	token, err := ParseToken(v.Token)
	if err != nil {
		t.Errorf("%s: token: %v", v.Name, err)
		return
	}
	ms, err := strconv.ParseUint(v.ExpiresMS, 10, 63)
	if err != nil || strconv.FormatUint(ms, 10) != v.ExpiresMS {
		t.Errorf("%s: expires_ms %q is not a decimal integer in 0..2^63-1 without leading zeros", v.Name, v.ExpiresMS)
		return
	}
	want := Sequencer{Resource: v.Resource, Holder: v.Holder, Token: token, KeyID: v.Kid}
	if ms != 0 {
		want.Expires = time.UnixMilli(int64(ms)).UTC()
	}
	same := func(got Sequencer) bool {
		return got.Resource == want.Resource && got.Holder == want.Holder && got.Token == want.Token &&
			got.KeyID == want.KeyID && got.Expires.Equal(want.Expires) && got.Expires.IsZero() == want.Expires.IsZero()
	}

	got, err := ParseSequencer(v.Sequencer)
	if err != nil || !same(got) {
		t.Errorf("%s: ParseSequencer=%+v, %v; want %+v", v.Name, got, err, want)
	}
	got, err = ks.Verify(v.Sequencer, v.Resource, token)
	if err != nil || !same(got) {
		t.Errorf("%s: Verify=%+v, %v; want %+v", v.Name, got, err, want)
	}
	if len(v.Sequencer) > MaxSequencerLen {
		t.Errorf("%s: %d bytes, more than %d", v.Name, len(v.Sequencer), MaxSequencerLen)
	}

	// The bytes, decoded and checked independently of parseSequencer.
	p64, s64, _ := strings.Cut(v.Sequencer, ".")
	payload, err1 := vecBase64.DecodeString(p64)
	sig, err2 := vecBase64.DecodeString(s64)
	if err1 != nil || err2 != nil || hex.EncodeToString(payload) != v.PayloadHex || hex.EncodeToString(sig) != v.SignatureHex {
		t.Errorf("%s: decoded payload %x, signature %x; want %s, %s", v.Name, payload, sig, v.PayloadHex, v.SignatureHex)
	}
	if enc := vecPayload(v.Kid, uint64(token), ms, v.Resource, v.Holder); !bytes.Equal(enc, payload) {
		t.Errorf("%s: payload %x, but the fields encode to %x", v.Name, payload, enc)
	}
	if pub := ks[v.Kid]; pub == nil || !ed25519.Verify(pub, append([]byte(vecContext), payload...), sig) {
		t.Errorf("%s: the signature does not verify with key %q over the context and the payload", v.Name, v.Kid)
	}
}

func checkInvalidVector(t *testing.T, ks KeySet, v invalidVector) {
	t.Helper()
	if v.Reason == "" {
		t.Errorf("%s: no reason", v.Name)
	}
	seq, parseErr := ParseSequencer(v.Sequencer)
	switch v.Stage {
	case "parse":
		if !errors.Is(parseErr, ErrInvalidSequencer) || !errors.Is(parseErr, errMalformedSequencer) || seq != (Sequencer{}) {
			t.Errorf("%s: ParseSequencer=%+v, %v; want a malformed sequencer (%s)", v.Name, seq, parseErr, v.Reason)
		}
		if _, err := ks.Verify(v.Sequencer, "orders", 5); !errors.Is(err, errMalformedSequencer) {
			t.Errorf("%s: Verify: %v; want a malformed sequencer (%s)", v.Name, err, v.Reason)
		}
	case "verify":
		if parseErr != nil {
			t.Errorf("%s: ParseSequencer: %v; want it to parse (%s)", v.Name, parseErr, v.Reason)
			return
		}
		got, err := ks.Verify(v.Sequencer, seq.Resource, seq.Token)
		if !errors.Is(err, ErrInvalidSequencer) || !(errors.Is(err, errUnknownKey) || errors.Is(err, errBadSignature)) || got != (Sequencer{}) {
			t.Errorf("%s: Verify=%+v, %v; want an unknown key id or a bad signature (%s)", v.Name, got, err, v.Reason)
		}
	default:
		t.Errorf("%s: stage %q, want parse or verify", v.Name, v.Stage)
	}
}

func checkMismatchVector(t *testing.T, ks KeySet, v mismatchVector) {
	t.Helper()
	token, err := ParseToken(v.Token)
	if err != nil {
		t.Errorf("%s: token: %v", v.Name, err)
		return
	}
	seq, err := ParseSequencer(v.Sequencer)
	if err != nil {
		t.Errorf("%s: ParseSequencer: %v", v.Name, err)
		return
	}
	if _, err := ks.Verify(v.Sequencer, seq.Resource, seq.Token); err != nil {
		t.Errorf("%s: the sequencer does not verify for its own resource and token: %v", v.Name, err)
	}
	want := errWrongToken
	if v.Resource != seq.Resource {
		want = errWrongResource
	} else if token == seq.Token {
		t.Errorf("%s: presents the resource and token of the sequencer", v.Name)
	}
	if _, err := ks.Verify(v.Sequencer, v.Resource, token); !errors.Is(err, ErrInvalidSequencer) || !errors.Is(err, want) {
		t.Errorf("%s: Verify(%q, %d): %v; want %v", v.Name, v.Resource, token, err, want)
	}
}

// The generator.

// vecBase64 is the test's own strict, unpadded base64url.
var vecBase64 = base64.RawURLEncoding.Strict()

// vecUvarint is the shortest unsigned LEB128 encoding of v.
func vecUvarint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// vecString is s with its length in front.
func vecString(s string) []byte { return append(vecUvarint(uint64(len(s))), s...) }

func vecCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// vecPayload is the canonical payload of the fields.
func vecPayload(kid string, token, expiresMS uint64, resource, holder string) []byte {
	return vecCat([]byte{1}, vecString(kid), vecUvarint(token), vecUvarint(expiresMS), vecString(resource), vecString(holder))
}

func vecCompact(payload, sig []byte) string {
	return vecBase64.EncodeToString(payload) + "." + vecBase64.EncodeToString(sig)
}

// vecSign returns the compact form of payload, whatever it holds, signed by
// priv over the context and the payload.
func vecSign(priv ed25519.PrivateKey, payload []byte) string {
	return vecCompact(payload, ed25519.Sign(priv, append([]byte(vecContext), payload...)))
}

// vecSetPadBits returns s, the unpadded base64url form of some bytes, with the
// unused low bits of its last character set.
func vecSetPadBits(t testing.TB, s string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var mask int
	switch len(s) % 4 {
	case 2:
		mask = 0x0f
	case 3:
		mask = 0x03
	default:
		t.Fatalf("%q has no padding bits", s)
	}
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i|mask])
}

func vecKey(t testing.TB, id, seedHex string) SigningKey {
	t.Helper()
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("seed of key %q is not %d bytes of hex", id, ed25519.SeedSize)
	}
	k := SigningKey{ID: id, Private: ed25519.NewKeyFromSeed(seed)}
	if k.ID == "" { // the id that GenerateSigningKey would give it
		sum := sha256.Sum256(k.Public().Key)
		k.ID = vecBase64.EncodeToString(sum[:8])
	}
	return k
}

type vectorGen struct {
	t testing.TB
	f vectorFile
}

// valid signs s with k through SigningKey.Sign, records it and returns the sequencer.
func (g *vectorGen) valid(name string, k SigningKey, s Sequencer) string {
	g.t.Helper()
	str, err := k.Sign(s)
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	var ms uint64
	if !s.Expires.IsZero() {
		ms = uint64(s.Expires.UnixMilli())
	}
	payload := vecPayload(k.ID, uint64(s.Token), ms, s.Resource, s.Holder)
	p64, s64, _ := strings.Cut(str, ".")
	sig, _ := vecBase64.DecodeString(s64)
	if p64 != vecBase64.EncodeToString(payload) {
		g.t.Fatalf("%s: Sign wrote payload %s, the generator's encoder %x", name, p64, payload)
	}
	g.f.Valid = append(g.f.Valid, validVector{
		Name: name, Sequencer: str, Kid: k.ID,
		Token: strconv.FormatUint(uint64(s.Token), 10), ExpiresMS: strconv.FormatUint(ms, 10),
		Resource: s.Resource, Holder: s.Holder,
		PayloadHex: hex.EncodeToString(payload), SignatureHex: hex.EncodeToString(sig),
	})
	return str
}

func (g *vectorGen) invalid(stage, name, seq, reason string) {
	g.f.Invalid = append(g.f.Invalid, invalidVector{Name: name, Sequencer: seq, Reason: reason, Stage: stage})
}

func (g *vectorGen) mismatch(name, seq, resource string, token Token) {
	g.f.Mismatch = append(g.f.Mismatch, mismatchVector{Name: name, Sequencer: seq, Resource: resource, Token: strconv.FormatUint(uint64(token), 10)})
}

// find returns the first valid sequencer that ok accepts.
func (g *vectorGen) find(what string, ok func(v validVector) bool) validVector {
	g.t.Helper()
	for _, v := range g.f.Valid {
		if ok(v) {
			return v
		}
	}
	g.t.Fatalf("no valid vector has %s", what)
	return validVector{}
}

// generateSequencerVectors returns the content of the vectors file.
func generateSequencerVectors(t testing.TB) []byte {
	t.Helper()
	// The private keys of RFC 8032 section 7.1, TEST 1, 2 and 3, so that the
	// public keys can be checked against the RFC; and one more that the key
	// set does not hold. These keys are public: never trust them outside tests.
	k1 := vecKey(t, "", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	k2 := vecKey(t, "backup-2026", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
	k3 := vecKey(t, strings.Repeat("max-kid_", 8), "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7")
	retired := vecKey(t, "retired-2025", "0fa1e5c2d38b7e4a96f0c1d2b3a4958677e8f9a0b1c2d3e4f5061728394a5b6c")
	if len(k3.ID) != MaxKeyIDLen {
		t.Fatalf("key id %q is not %d bytes", k3.ID, MaxKeyIDLen)
	}

	g := &vectorGen{t: t, f: vectorFile{Format: vectorsFormat}}
	for _, k := range []SigningKey{k1, k2, k3} {
		pub := k.Public()
		jwk, err := json.Marshal(pub)
		if err != nil {
			t.Fatal(err)
		}
		g.f.Keys = append(g.f.Keys, vectorKey{Kid: k.ID, JWK: jwk, PublicKeyHex: hex.EncodeToString(pub.Key)})
	}

	const (
		jan2026  = 1767225600123 // 2026-01-01T00:00:00.123Z
		token253 = 1<<53 + 1     // the first integer a float64 cannot hold
	)
	ms := func(v int64) time.Time { return time.UnixMilli(v).UTC() }

	// Valid.
	small := g.valid("small-token", k1, Sequencer{Resource: "orders", Holder: "worker-a", Token: 5, Expires: ms(jan2026)})
	big53 := g.valid("token-2^53+1", k1, Sequencer{Resource: "inventory/eu-west-1", Holder: "pod-7", Token: token253, Expires: ms(jan2026 + 10_000)})
	maxTok := g.valid("token-max", k2, Sequencer{Resource: "payments", Holder: "billing-3", Token: MaxToken, Expires: ms(1798761600000)})
	g.valid("no-expiry-minimum-fields", k2, Sequencer{Resource: "r", Holder: "h", Token: 1})
	g.valid("expires-1ms", k1, Sequencer{Resource: "jobs/nightly", Holder: "cron@host-1", Token: 300, Expires: ms(1)})
	utf := g.valid("utf8-resource-and-holder", k1, Sequencer{Resource: "ユーザー/42/café", Holder: "Jürgen 🦊", Token: 77, Expires: ms(jan2026)})
	g.valid("resource-max-length", k2, Sequencer{Resource: strings.Repeat("0123456789abcdef", MaxNameLen/16), Holder: "bulk-loader", Token: 1000, Expires: ms(jan2026)})
	longest := g.valid("all-maxima", k3, Sequencer{
		Resource: strings.Repeat("🔒", MaxNameLen/4), // 4 bytes each, 2 UTF-16 code units each
		Holder:   strings.Repeat("ü", MaxHolderLen/2),
		Token:    MaxToken,
		Expires:  ms(math.MaxInt64),
	})
	g.valid("allowed-edge-characters", k1, Sequencer{
		// Spaces, quotes, backslash, '%', U+00A0 (the first code point after
		// the C1 controls), U+FEFF (a format character), U+2028 (a line
		// separator), a combining accent and U+10FFFF: all allowed, none
		// normalised.
		Resource: "a b\"c\\d%2F/e\u00a0f\ufeffg\u2028h e\u0301 \U0010ffff",
		Holder:   "~ holder\u00a0ÿ",
		Token:    12345678901234,
		Expires:  ms(jan2026),
	})
	if len(longest) != 1229 { // the longest sequencer there can be, as docs/sequencer.md says
		t.Fatalf("all-maxima is %d bytes, want 1229", len(longest))
	}

	// Invalid: the bytes around the payload.
	p64, s64, _ := strings.Cut(small, ".")
	payload, _ := vecBase64.DecodeString(p64)
	sig, _ := vecBase64.DecodeString(s64)
	parse := func(name, seq, reason string) { g.invalid("parse", name, seq, reason) }
	parse("empty", "", "an empty string")
	parse("only-dot", ".", "an empty payload and an empty signature")
	parse("missing-dot", p64+s64, "the payload and the signature are not separated by a dot")
	parse("payload-only", p64, "no dot and no signature")
	parse("two-dots-trailing", small+".", "a second dot, after the signature")
	parse("two-dots-three-parts", p64+"."+p64+"."+s64, "three dot-separated parts")
	parse("two-dots-adjacent", p64+".."+s64, "two dots between the payload and the signature")
	parse("empty-payload", "."+s64, "the payload part is empty")
	parse("empty-signature", p64+".", "the signature part is empty")
	padded := g.find("a payload whose length is not a multiple of 3", func(v validVector) bool { return len(v.PayloadHex)/2%3 != 0 })
	pp64, ps64, _ := strings.Cut(padded.Sequencer, ".")
	ppayload, _ := hex.DecodeString(padded.PayloadHex)
	parse("padded-payload", base64.URLEncoding.EncodeToString(ppayload)+"."+ps64, "the payload part has '=' padding")
	parse("padded-signature", p64+"."+base64.URLEncoding.EncodeToString(sig), "the signature part has '=' padding")
	minus := g.find("a '-'", func(v validVector) bool { return strings.Contains(v.Sequencer, "-") }).Sequencer
	parse("standard-alphabet-plus", strings.ReplaceAll(minus, "-", "+"), "standard base64: '+' where base64url has '-'")
	underscore := g.find("a '_'", func(v validVector) bool { return strings.Contains(v.Sequencer, "_") }).Sequencer
	parse("standard-alphabet-slash", strings.ReplaceAll(underscore, "_", "/"), "standard base64: '/' where base64url has '_'")
	parse("pad-bits-payload", vecSetPadBits(t, pp64)+"."+ps64, "the unused low bits of the payload's last character are not zero")
	parse("pad-bits-signature", p64+"."+vecSetPadBits(t, s64), "the unused low bits of the signature's last character are not zero")
	parse("base64-length-1-mod-4", p64+"A."+s64, "a payload part of 4n+1 characters, which encodes no whole number of bytes")
	parse("leading-space", " "+small, "a space before the sequencer")
	parse("trailing-space", small+" ", "a space after the sequencer")
	parse("trailing-newline", small+"\n", "a newline after the sequencer")
	parse("newline-inside", p64[:8]+"\n"+p64[8:]+"."+s64, "a newline inside the payload part (some base64 decoders skip it)")
	parse("carriage-return-inside", p64+"\r."+s64, "a carriage return before the dot")
	parse("tab-inside", p64+"."+s64[:8]+"\t"+s64[8:], "a tab inside the signature part")
	parse("non-ascii-character", p64[:8]+"é"+p64[8:]+"."+s64, "a non-ASCII character inside the payload part")
	parse("signature-63-bytes", p64+"."+vecBase64.EncodeToString(sig[:63]), "the signature is 63 bytes, not 64")
	parse("signature-65-bytes", p64+"."+vecBase64.EncodeToString(append(bytes.Clone(sig), 0)), "the signature is 65 bytes, not 64")

	// Invalid: the payload. Each is signed by k1 over its own bytes, so
	// that only the defect makes it invalid.
	var (
		ver = []byte{1}
		kid = vecString(k1.ID)
		tok = vecUvarint(5)
		exp = vecUvarint(jan2026)
		res = vecString("orders")
		hol = vecString("worker-a")
	)
	bad := func(parts ...[]byte) string { return vecSign(k1.Private, vecCat(parts...)) }
	if bad(ver, kid, tok, exp, res, hol) != small {
		t.Fatal("the generator's encoder disagrees with Sign")
	}
	long := ""
	for n := 1; len(long) != MaxSequencerLen+1; n++ {
		if n > 2*MaxSequencerLen {
			t.Fatal("found no over-long sequencer of MaxSequencerLen+1 bytes")
		}
		long = bad(ver, kid, tok, exp, vecString(strings.Repeat("r", n)), hol)
	}
	parse("too-long", long, "2049 bytes, more than the 2048 allowed (its resource is too long as well)")
	parse("version-0", bad([]byte{0}, kid, tok, exp, res, hol), "version byte 0x00, not 0x01")
	parse("version-2", bad([]byte{2}, kid, tok, exp, res, hol), "version byte 0x02, not 0x01")
	parse("only-version", bad(ver), "the payload ends after the version byte")
	parse("empty-kid", bad(ver, vecString(""), tok, exp, res, hol), "an empty key id")
	parse("kid-bad-character-dot", bad(ver, vecString("k.1"), tok, exp, res, hol), "a '.' in the key id")
	parse("kid-bad-character-plus", bad(ver, vecString("k+1"), tok, exp, res, hol), "a '+' in the key id")
	parse("kid-bad-character-space", bad(ver, vecString("k 1"), tok, exp, res, hol), "a space in the key id")
	parse("kid-non-ascii", bad(ver, vecString("kë1"), tok, exp, res, hol), "a non-ASCII letter in the key id")
	parse("kid-65-bytes", bad(ver, vecString(strings.Repeat("k", MaxKeyIDLen+1)), tok, exp, res, hol), "a key id of 65 bytes, more than 64")
	parse("token-0", bad(ver, kid, vecUvarint(0), exp, res, hol), "token 0")
	parse("token-2^63", bad(ver, kid, vecUvarint(1<<63), exp, res, hol), "token 2^63, more than 2^63-1")
	parse("token-2^64-1", bad(ver, kid, vecUvarint(math.MaxUint64), exp, res, hol), "token 2^64-1, more than 2^63-1")
	parse("token-overflows-64-bits", bad(ver, kid, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, exp, res, hol), "a token varint whose value is 2^64, which does not fit 64 bits")
	parse("token-11-byte-varint", bad(ver, kid, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, exp, res, hol), "a token varint of 11 bytes")
	parse("token-non-shortest", bad(ver, kid, []byte{0x85, 0x00}, exp, res, hol), "token 5 as the 2-byte varint 85 00 instead of 05")
	parse("token-non-shortest-3-bytes", bad(ver, kid, []byte{0x81, 0x80, 0x00}, exp, res, hol), "token 1 as a 3-byte varint")
	parse("expires-non-shortest", bad(ver, kid, tok, []byte{0x80, 0x00}, res, hol), "expires 0 as the 2-byte varint 80 00 instead of 00")
	parse("expires-2^63", bad(ver, kid, tok, vecUvarint(1<<63), res, hol), "expires 2^63, more than 2^63-1")
	parse("kid-length-non-shortest", bad(ver, append([]byte{byte(len(k1.ID)) | 0x80, 0x00}, k1.ID...), tok, exp, res, hol), "the key id length as a 2-byte varint")
	parse("resource-length-non-shortest", bad(ver, kid, tok, exp, []byte{0x86, 0x00}, []byte("orders"), hol), "the resource length as a 2-byte varint")
	parse("holder-length-non-shortest", bad(ver, kid, tok, exp, res, []byte{0x88, 0x00}, []byte("worker-a")), "the holder length as a 2-byte varint")
	parse("trailing-byte", bad(ver, kid, tok, exp, res, hol, []byte{0}), "a zero byte after the holder")
	parse("trailing-bytes", bad(ver, kid, tok, exp, res, hol, vecString("extra")), "a seventh field after the holder")
	parse("missing-holder", bad(ver, kid, tok, exp, res), "the payload ends after the resource")
	parse("truncated-varint", bad(ver, kid, []byte{0x85}), "the payload ends inside the token varint")
	parse("holder-length-past-end", bad(ver, kid, tok, exp, res, []byte{50}, []byte("worker-a")), "a holder length of 50 with 8 bytes left")
	parse("huge-length", bad(ver, kid, tok, exp, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, []byte("orders"), hol), "a resource length of 2^32-1")
	parse("empty-resource", bad(ver, kid, tok, exp, vecString(""), hol), "an empty resource")
	parse("empty-holder", bad(ver, kid, tok, exp, res, vecString("")), "an empty holder")
	parse("resource-513-bytes", bad(ver, kid, tok, exp, vecString(strings.Repeat("r", MaxNameLen+1)), hol), "a resource of 513 bytes, more than 512")
	parse("resource-513-bytes-utf8", bad(ver, kid, tok, exp, vecString("r"+strings.Repeat("🔒", MaxNameLen/4)), hol), "a resource of 129 characters but 513 bytes")
	parse("holder-257-bytes", bad(ver, kid, tok, exp, res, vecString(strings.Repeat("h", MaxHolderLen+1))), "a holder of 257 bytes, more than 256")
	parse("resource-nul", bad(ver, kid, tok, exp, vecString("or\x00ders"), hol), "a NUL (U+0000) in the resource")
	parse("resource-newline", bad(ver, kid, tok, exp, vecString("orders\n"), hol), "a newline (U+000A) in the resource")
	parse("resource-del", bad(ver, kid, tok, exp, vecString("orders\x7f"), hol), "a DEL (U+007F) in the resource")
	parse("resource-c1-control", bad(ver, kid, tok, exp, vecString("orders\u0085"), hol), "U+0085, a C1 control character, in the resource")
	parse("holder-c1-control", bad(ver, kid, tok, exp, res, vecString("worker\u009f")), "U+009F, a C1 control character, in the holder")
	parse("holder-tab", bad(ver, kid, tok, exp, res, vecString("worker\ta")), "a tab (U+0009) in the holder")
	parse("resource-utf8-truncated", bad(ver, kid, tok, exp, vecString("caf\xc3"), hol), "a resource that ends inside a UTF-8 sequence")
	parse("resource-utf8-overlong", bad(ver, kid, tok, exp, vecString("a\xc0\xafb"), hol), "an overlong UTF-8 encoding of '/' in the resource")
	parse("resource-utf8-surrogate", bad(ver, kid, tok, exp, vecString("a\xed\xa0\x80b"), hol), "a UTF-16 surrogate (U+D800) encoded in the resource")
	parse("holder-utf8-above-max", bad(ver, kid, tok, exp, res, vecString("w\xf4\x90\x80\x80")), "a code point above U+10FFFF in the holder")
	parse("holder-utf8-continuation", bad(ver, kid, tok, exp, res, vecString("w\x80")), "a lone UTF-8 continuation byte in the holder")

	// Invalid: well formed, but the key id or the signature is wrong.
	verify := func(name, seq, reason string) { g.invalid("verify", name, seq, reason) }
	flip := func(i int, bit byte) string {
		s := bytes.Clone(sig)
		s[i] ^= bit
		return vecCompact(payload, s)
	}
	verify("signature-bit-flipped-r", flip(0, 0x01), "one bit of the signature's R half flipped")
	verify("signature-bit-flipped-s", flip(40, 0x10), "one bit of the signature's S half flipped")
	sPlusL := func() string {
		le := func(b []byte) *big.Int { // little-endian bytes to an integer
			r := bytes.Clone(b)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			return new(big.Int).SetBytes(r)
		}
		l, _ := new(big.Int).SetString("27742317777372353535851937790883648493", 10)
		l.Add(l, new(big.Int).Lsh(big.NewInt(1), 252)) // the order of the base point
		v := le(sig[32:])
		v.Add(v, l)
		be := v.FillBytes(make([]byte, 32))
		s := bytes.Clone(sig)
		for i := range 32 {
			s[32+i] = be[31-i]
		}
		return vecCompact(payload, s)
	}()
	verify("signature-s-not-reduced", sPlusL, "the signature's S plus the group order L: S is not less than L, so the signature is not canonical")
	verify("signature-all-zero", vecCompact(payload, make([]byte, 64)), "a signature of 64 zero bytes")
	verify("payload-token-changed", vecCompact(vecPayload(k1.ID, 6, jan2026, "orders", "worker-a"), sig), "the token changed from 5 to 6 after signing")
	verify("payload-resource-changed", vecCompact(vecPayload(k1.ID, 5, jan2026, "orderz", "worker-a"), sig), "the resource changed after signing")
	verify("unknown-kid", vecSign(retired.Private, vecPayload(retired.ID, 5, jan2026, "orders", "worker-a")), "signed by a key whose id is not in the key set")
	verify("kid-case-differs", vecSign(k2.Private, vecPayload(strings.ToUpper(k2.ID[:1])+k2.ID[1:], 5, jan2026, "orders", "worker-a")), "signed by key backup-2026 but naming Backup-2026: key ids are case-sensitive")
	verify("signed-by-other-key-in-set", vecSign(k2.Private, payload), "names key "+k1.ID+" but is signed by key backup-2026, which is in the set too: only the named key may verify")
	verify("forged-same-kid", vecSign(retired.Private, vecPayload(k1.ID, uint64(MaxToken), 0, "orders", "worker-a")), "names key "+k1.ID+" but is signed by a key outside the set, with token 2^63-1")
	verify("signature-without-context", vecCompact(payload, ed25519.Sign(k1.Private, payload)), "signed over the payload alone, without the context string")
	verify("context-without-zero-byte", vecCompact(payload, ed25519.Sign(k1.Private, append([]byte("fence-seq-v1"), payload...))), "signed over the context string without its zero byte")

	// Mismatch: authentic, but presented with another resource or token.
	g.mismatch("other-resource", small, "payments", 5)
	g.mismatch("resource-trailing-space", small, "orders ", 5)
	g.mismatch("resource-case", small, "Orders", 5)
	g.mismatch("resource-prefix", small, "order", 5)
	g.mismatch("resource-longer", small, "orders/eu", 5)
	g.mismatch("resource-nfd", utf, "ユーザー/42/cafe\u0301", 77) // the same text, decomposed: never normalise
	g.mismatch("token-plus-one", small, "orders", 6)
	g.mismatch("token-minus-one", small, "orders", 4)
	g.mismatch("token-raised-to-max", small, "orders", MaxToken)
	g.mismatch("token-2^53", big53, "inventory/eu-west-1", 1<<53) // equal to 2^53+1 as float64
	g.mismatch("token-max-minus-one", maxTok, "payments", MaxToken-1)

	for _, v := range g.f.Invalid {
		if !utf8.ValidString(v.Sequencer) { // JSON would replace the bytes
			t.Fatalf("%s: not valid UTF-8", v.Name)
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g.f); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
