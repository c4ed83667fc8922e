package fence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// testKey returns a fixed signing key, so that seeds and failures are reproducible.
func testKey(t testing.TB, id string, seedByte byte) SigningKey {
	t.Helper()
	return SigningKey{ID: id, Private: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seedByte}, ed25519.SeedSize))}
}

func testSequencer() Sequencer {
	return Sequencer{
		Resource: "orders",
		Holder:   "worker-a",
		Token:    5,
		Expires:  time.UnixMilli(1767225600123).UTC(),
	}
}

func mustSign(t testing.TB, k SigningKey, s Sequencer) string {
	t.Helper()
	str, err := k.Sign(s)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return str
}

func keySet(keys ...SigningKey) KeySet {
	ks := KeySet{}
	for _, k := range keys {
		ks[k.ID] = k.Public().Key
	}
	return ks
}

// wantInvalid fails unless err wraps ErrInvalidSequencer and reason.
func wantInvalid(t *testing.T, err, reason error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidSequencer) || !errors.Is(err, reason) {
		t.Fatalf("err=%v, want ErrInvalidSequencer with %q", err, reason)
	}
}

func TestSigningKey_Sign(t *testing.T) {
	key := testKey(t, "k1", 1)
	ks := keySet(key)

	t.Run("OK", func(t *testing.T) {
		in := testSequencer()
		s := mustSign(t, key, in)
		if len(s) > MaxSequencerLen || !isBase64URL(strings.Replace(s, ".", "", 1)) {
			t.Fatalf("sequencer %q is not compact base64url", s)
		}
		got, err := ks.Verify(s, "orders", 5)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		in.KeyID = "k1"
		if got != in {
			t.Fatalf("Verify=%+v, want %+v", got, in)
		}
		parsed, err := ParseSequencer(s)
		if err != nil || parsed != in {
			t.Fatalf("ParseSequencer=%+v, %v; want %+v", parsed, err, in)
		}
		if again := mustSign(t, key, got); again != s {
			t.Fatalf("re-signed %q, want %q", again, s) // Ed25519 is deterministic
		}
	})

	t.Run("NoExpiry", func(t *testing.T) {
		in := testSequencer()
		in.Expires = time.Time{}
		got, err := ks.Verify(mustSign(t, key, in), "orders", 5)
		if err != nil || !got.Expires.IsZero() {
			t.Fatalf("Verify=%+v, %v; want zero Expires", got, err)
		}
	})

	t.Run("ExpiresTruncatedToMillisecond", func(t *testing.T) {
		in := testSequencer()
		in.Expires = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
		got, err := ks.Verify(mustSign(t, key, in), "orders", 5)
		if err != nil || !got.Expires.Equal(in.Expires.Truncate(time.Millisecond)) {
			t.Fatalf("Expires=%v, %v; want %v", got.Expires, err, in.Expires.Truncate(time.Millisecond))
		}
	})

	t.Run("ExpiredStillVerifies", func(t *testing.T) {
		in := testSequencer()
		in.Expires = time.UnixMilli(1) // long ago; expiry is not a reason to reject
		if _, err := ks.Verify(mustSign(t, key, in), "orders", 5); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})

	t.Run("Limits", func(t *testing.T) {
		in := Sequencer{
			Resource: strings.Repeat("é", MaxNameLen/2),
			Holder:   strings.Repeat("h", MaxHolderLen),
			Token:    MaxToken,
			Expires:  time.UnixMilli(1<<63 - 1).UTC(),
		}
		long := testKey(t, strings.Repeat("K", MaxKeyIDLen), 2)
		s := mustSign(t, long, in)
		if len(s) > MaxSequencerLen {
			t.Fatalf("len=%d, more than %d", len(s), MaxSequencerLen)
		}
		in.KeyID = long.ID
		if got, err := keySet(long).Verify(s, in.Resource, MaxToken); err != nil || got != in {
			t.Fatalf("Verify=%+v, %v; want %+v", got, err, in)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		for name, tc := range map[string]struct {
			key  SigningKey
			seq  func(*Sequencer)
			want error
		}{
			"ZeroToken":       {key, func(s *Sequencer) { s.Token = 0 }, ErrInvalidToken},
			"TokenTooLarge":   {key, func(s *Sequencer) { s.Token = MaxToken + 1 }, ErrInvalidToken},
			"EmptyResource":   {key, func(s *Sequencer) { s.Resource = "" }, ErrBadRequest},
			"LongResource":    {key, func(s *Sequencer) { s.Resource = strings.Repeat("r", MaxNameLen+1) }, ErrBadRequest},
			"ControlResource": {key, func(s *Sequencer) { s.Resource = "a\nb" }, ErrBadRequest},
			"EmptyHolder":     {key, func(s *Sequencer) { s.Holder = "" }, ErrBadRequest},
			"BadUTF8Holder":   {key, func(s *Sequencer) { s.Holder = "\xff" }, ErrBadRequest},
			"Expires1970":     {key, func(s *Sequencer) { s.Expires = time.Unix(0, 0) }, ErrBadRequest},
			"ExpiresBefore":   {key, func(s *Sequencer) { s.Expires = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrBadRequest},
			"BadKeyID":        {SigningKey{ID: "a/b", Private: key.Private}, func(*Sequencer) {}, nil},
			"EmptyKeyID":      {SigningKey{Private: key.Private}, func(*Sequencer) {}, nil},
			"NoPrivateKey":    {SigningKey{ID: "k"}, func(*Sequencer) {}, nil},
		} {
			t.Run(name, func(t *testing.T) {
				s := testSequencer()
				tc.seq(&s)
				str, err := tc.key.Sign(s)
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Fatalf("Sign=%q, %v; want error %v", str, err, tc.want)
				}
			})
		}
	})
}

func TestKeySet_Verify(t *testing.T) {
	key := testKey(t, "k1", 1)
	other := testKey(t, "k1", 9) // same id, different key: an attacker's
	ks := keySet(key)
	good := mustSign(t, key, testSequencer())
	payload64, sig64, _ := strings.Cut(good, ".")

	t.Run("TamperedPayload", func(t *testing.T) {
		payload, _ := seqBase64.DecodeString(payload64)
		for _, mutate := range []func(p []byte) []byte{
			func(p []byte) []byte { p[len(p)-1] ^= 1; return p }, // holder
			func(p []byte) []byte { // token 5 -> 6
				i := bytes.IndexByte(p, 5)
				p[i] = 6
				return p
			},
		} {
			p := mutate(bytes.Clone(payload))
			_, err := ks.Verify(seqBase64.EncodeToString(p)+"."+sig64, "orders", 5)
			wantInvalid(t, err, errBadSignature)
		}
	})

	t.Run("TamperedSignature", func(t *testing.T) {
		sig, _ := seqBase64.DecodeString(sig64)
		for _, i := range []int{0, 31, 32, 63} {
			s := bytes.Clone(sig)
			s[i] ^= 0x80
			_, err := ks.Verify(payload64+"."+seqBase64.EncodeToString(s), "orders", 5)
			wantInvalid(t, err, errBadSignature)
		}
	})

	t.Run("ForgedWithOtherKeySameID", func(t *testing.T) {
		forged := testSequencer()
		forged.Token = MaxToken
		_, err := ks.Verify(mustSign(t, other, forged), "orders", MaxToken)
		wantInvalid(t, err, errBadSignature)
	})

	t.Run("UnknownKeyID", func(t *testing.T) {
		_, err := ks.Verify(mustSign(t, testKey(t, "k2", 1), testSequencer()), "orders", 5)
		wantInvalid(t, err, errUnknownKey)
	})

	t.Run("EmptyKeySet", func(t *testing.T) {
		_, err := KeySet(nil).Verify(good, "orders", 5)
		wantInvalid(t, err, errUnknownKey)
	})

	t.Run("BrokenPublicKey", func(t *testing.T) {
		_, err := KeySet{"k1": ed25519.PublicKey{1, 2, 3}}.Verify(good, "orders", 5) // must not panic
		wantInvalid(t, err, errUnknownKey)
	})

	t.Run("WrongToken", func(t *testing.T) {
		// A client holding token 5 tries to raise the fence for ever.
		_, err := ks.Verify(good, "orders", MaxToken)
		wantInvalid(t, err, errWrongToken)
		_, err = ks.Verify(good, "orders", 4)
		wantInvalid(t, err, errWrongToken)
		_, err = ks.Verify(good, "orders", 0)
		wantInvalid(t, err, errWrongToken)
	})

	t.Run("ReplayedOnOtherResource", func(t *testing.T) {
		_, err := ks.Verify(good, "payments", 5)
		wantInvalid(t, err, errWrongResource)
		_, err = ks.Verify(good, "orders ", 5)
		wantInvalid(t, err, errWrongResource)
	})

	t.Run("Malformed", func(t *testing.T) {
		_, err := ks.Verify(good+"x", "orders", 5)
		wantInvalid(t, err, errMalformedSequencer)
	})
}

func TestKeySet_Rotation(t *testing.T) {
	oldKey, newKey := testKey(t, "old", 1), testKey(t, "new", 2)
	oldSeq := mustSign(t, oldKey, testSequencer())
	newSeq := mustSign(t, newKey, testSequencer())

	both := keySet(oldKey, newKey)
	for _, s := range []string{oldSeq, newSeq} {
		if _, err := both.Verify(s, "orders", 5); err != nil {
			t.Fatalf("Verify with both keys: %v", err)
		}
	}
	onlyNew := keySet(newKey)
	if _, err := onlyNew.Verify(newSeq, "orders", 5); err != nil {
		t.Fatalf("Verify new: %v", err)
	}
	_, err := onlyNew.Verify(oldSeq, "orders", 5)
	wantInvalid(t, err, errUnknownKey)
}

func TestParseSequencer(t *testing.T) {
	key := testKey(t, "k1", 1)
	good := mustSign(t, key, testSequencer())
	payload64, sig64, _ := strings.Cut(good, ".")
	payload, _ := seqBase64.DecodeString(payload64)
	sig, _ := seqBase64.DecodeString(sig64)
	enc := func(p []byte) string { return seqBase64.EncodeToString(p) + "." + sig64 }
	// build assembles a payload from raw pieces, to make ones Sign refuses to.
	build := func(pieces ...[]byte) string { return enc(bytes.Join(pieces, nil)) }
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	exp := []byte{0}
	tok5 := []byte{5}

	if _, err := ParseSequencer(build([]byte{1}, str("k1"), tok5, exp, str("orders"), str("worker-a"))); err != nil {
		t.Fatalf("hand-built payload: %v", err)
	}

	for name, in := range map[string]string{
		"Empty":             "",
		"Dot":               ".",
		"NoDot":             payload64,
		"TwoDots":           good + ".",
		"EmptyPayload":      "." + sig64,
		"EmptySignature":    payload64 + ".",
		"Padded":            seqBase64.EncodeToString(payload) + "==." + sig64,
		"StdAlphabet":       strings.NewReplacer("-", "+", "_", "/").Replace(payload64) + "+." + sig64,
		"Newline":           payload64[:4] + "\n" + payload64[4:] + "." + sig64,
		"CR":                payload64 + "\r." + sig64,
		"Space":             " " + good,
		"TrailingSpace":     good + " ",
		"TrailingNewline":   good + "\n",
		"TrailingJunk":      good + "AA",
		"ShortSignature":    payload64 + "." + seqBase64.EncodeToString(sig[:63]),
		"LongSignature":     payload64 + "." + seqBase64.EncodeToString(append(bytes.Clone(sig), 0)),
		"NonZeroPadBits":    payload64 + "." + sig64[:len(sig64)-1] + string(flipLastBits(sig64)),
		"TooLong":           strings.Repeat("A", MaxSequencerLen) + "." + sig64,
		"Version0":          build([]byte{0}, payload[1:]),
		"Version2":          build([]byte{2}, payload[1:]),
		"TrailingByte":      enc(append(bytes.Clone(payload), 0)),
		"Truncated":         enc(payload[:len(payload)-1]),
		"OnlyVersion":       build([]byte{1}),
		"EmptyKeyID":        build([]byte{1}, str(""), tok5, exp, str("orders"), str("w")),
		"BadKeyID":          build([]byte{1}, str("a.b"), tok5, exp, str("orders"), str("w")),
		"LongKeyID":         build([]byte{1}, str(strings.Repeat("k", MaxKeyIDLen+1)), tok5, exp, str("orders"), str("w")),
		"ZeroToken":         build([]byte{1}, str("k1"), []byte{0}, exp, str("orders"), str("w")),
		"TokenTooLarge":     build([]byte{1}, str("k1"), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, exp, str("orders"), str("w")),
		"TokenOverflow":     build([]byte{1}, str("k1"), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, exp, str("orders"), str("w")),
		"NonMinimalToken":   build([]byte{1}, str("k1"), []byte{0x85, 0x00}, exp, str("orders"), str("w")),
		"NonMinimalExpires": build([]byte{1}, str("k1"), tok5, []byte{0x80, 0x00}, str("orders"), str("w")),
		"NonMinimalLength":  build([]byte{1}, []byte{0x82, 0x00}, []byte("k1"), tok5, exp, str("orders"), str("w")),
		"ExpiresTooLarge":   build([]byte{1}, str("k1"), tok5, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, str("orders"), str("w")),
		"EmptyResource":     build([]byte{1}, str("k1"), tok5, exp, str(""), str("w")),
		"ControlResource":   build([]byte{1}, str("k1"), tok5, exp, str("or\x00ders"), str("w")),
		"BadUTF8Resource":   build([]byte{1}, str("k1"), tok5, exp, str("\xc3"), str("w")),
		"EmptyHolder":       build([]byte{1}, str("k1"), tok5, exp, str("orders"), str("")),
		"ResourceTooLong":   build([]byte{1}, str("k1"), tok5, exp, []byte{0x81, 0x04}, bytes.Repeat([]byte("r"), MaxNameLen+1), str("w")),
		"HolderTooLong":     build([]byte{1}, str("k1"), tok5, exp, str("orders"), []byte{0x81, 0x02}, bytes.Repeat([]byte("h"), MaxHolderLen+1)),
		"LengthPastEnd":     build([]byte{1}, str("k1"), tok5, exp, str("orders"), []byte{50}, []byte("w")),
		"HugeLength":        build([]byte{1}, str("k1"), tok5, exp, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, []byte("orders")),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSequencer(in)
			wantInvalid(t, err, errMalformedSequencer)
			if got != (Sequencer{}) {
				t.Fatalf("ParseSequencer=%+v with error", got)
			}
			if errors.Is(err, ErrBadRequest) || errors.Is(err, ErrInvalidToken) {
				t.Fatalf("err=%v also wraps another API code", err)
			}
			if _, err := keySet(key).Verify(in, "orders", 5); !errors.Is(err, ErrInvalidSequencer) {
				t.Fatalf("Verify err=%v, want ErrInvalidSequencer", err)
			}
		})
	}
}

// flipLastBits returns the last character of a 64-byte signature's base64url
// form with its (unused) low bits set, which a strict seqDecoder rejects.
func flipLastBits(s string) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return []byte{alphabet[i|0x0f]}
}

func TestSigningKey_MarshalText(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		key, err := GenerateSigningKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := validateKeyID(key.ID); err != nil || len(key.ID) != 11 {
			t.Fatalf("ID=%q, %v; want 11 base64url characters", key.ID, err)
		}
		text, err := key.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(text), "fence-ed25519-v1:"+key.ID+":") || bytes.ContainsAny(text, "\n=") {
			t.Fatalf("MarshalText=%q", text)
		}
		for _, file := range [][]byte{text, append(bytes.Clone(text), '\n'), append(bytes.Clone(text), "\r\n"...)} {
			var got SigningKey
			if err := got.UnmarshalText(file); err != nil {
				t.Fatalf("UnmarshalText(%q): %v", file, err)
			}
			if got.ID != key.ID || !got.Private.Equal(key.Private) {
				t.Fatalf("UnmarshalText=%v, want %v", got, key)
			}
		}
		// A key read from a file signs what the public key verifies.
		var read SigningKey
		_ = read.UnmarshalText(text)
		if _, err := keySet(key).Verify(mustSign(t, read, testSequencer()), "orders", 5); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})

	t.Run("NotLogged", func(t *testing.T) {
		key := testKey(t, "k1", 1)
		seed := seqBase64.EncodeToString(key.Private.Seed())
		for _, s := range []string{fmt.Sprint(key), fmt.Sprintf("%+v", key), fmt.Sprintf("%#v", key)} {
			if strings.Contains(s, seed) || strings.Contains(s, fmt.Sprint([]byte(key.Private))) {
				t.Fatalf("formatted key %q shows the private key", s)
			}
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		seed := seqBase64.EncodeToString(bytes.Repeat([]byte{7}, 32))
		for name, in := range map[string]string{
			"Empty":          "",
			"NoPrefix":       "k1:" + seed,
			"OtherVersion":   "fence-ed25519-v2:k1:" + seed,
			"NoID":           "fence-ed25519-v1::" + seed,
			"NoSeed":         "fence-ed25519-v1:k1",
			"EmptySeed":      "fence-ed25519-v1:k1:",
			"BadID":          "fence-ed25519-v1:k/1:" + seed,
			"ShortSeed":      "fence-ed25519-v1:k1:" + seqBase64.EncodeToString(make([]byte, 31)),
			"LongSeed":       "fence-ed25519-v1:k1:" + seqBase64.EncodeToString(make([]byte, 33)),
			"FullPrivateKey": "fence-ed25519-v1:k1:" + seqBase64.EncodeToString(make([]byte, 64)),
			"PaddedSeed":     "fence-ed25519-v1:k1:" + base64.URLEncoding.EncodeToString(make([]byte, 32)),
			"StdBase64":      "fence-ed25519-v1:k1:" + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)),
			"ExtraColon":     "fence-ed25519-v1:k1:" + seed + ":",
			"TwoNewlines":    "fence-ed25519-v1:k1:" + seed + "\n\n",
			"InnerNewline":   "fence-ed25519-v1:k1:" + seed[:10] + "\n" + seed[10:],
			"LeadingSpace":   " fence-ed25519-v1:k1:" + seed,
			"TrailingSpace":  "fence-ed25519-v1:k1:" + seed + " ",
		} {
			t.Run(name, func(t *testing.T) {
				k := SigningKey{ID: "keep"}
				if err := k.UnmarshalText([]byte(in)); err == nil {
					t.Fatalf("UnmarshalText(%q)=%v, want error", in, k)
				}
				if k.ID != "keep" {
					t.Fatalf("UnmarshalText changed the key on error: %v", k)
				}
			})
		}
	})

	t.Run("InvalidKey", func(t *testing.T) {
		for _, k := range []SigningKey{{}, {ID: "k1"}, {ID: "k1", Private: make([]byte, 32)}, {ID: "a b", Private: testKey(t, "x", 1).Private}} {
			if text, err := k.MarshalText(); err == nil {
				t.Fatalf("MarshalText(%v)=%q, want error", k, text)
			}
		}
		if pub := (SigningKey{ID: "k1"}).Public(); pub.Key != nil {
			t.Fatalf("Public of a key without private key = %v", pub)
		}
	})
}

func TestPublicKey_JSON(t *testing.T) {
	key := testKey(t, "k1", 1)
	pub := key.Public()

	t.Run("OK", func(t *testing.T) {
		data, err := json.Marshal([]PublicKey{pub})
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"kty":"OKP","crv":"Ed25519","alg":"Ed25519","kid":"k1","x":"` + seqBase64.EncodeToString(pub.Key) + `"}]`
		if string(data) != want {
			t.Fatalf("Marshal=%s, want %s", data, want)
		}
		var got []PublicKey
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != "k1" || !got[0].Key.Equal(pub.Key) {
			t.Fatalf("Unmarshal=%v, want %v", got, pub)
		}
	})

	t.Run("AcceptedVariants", func(t *testing.T) {
		x := seqBase64.EncodeToString(pub.Key)
		for _, in := range []string{
			`{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + x + `"}`,
			`{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","kid":"k1","x":"` + x + `","use":"sig"}`,
		} {
			var got PublicKey
			if err := json.Unmarshal([]byte(in), &got); err != nil || !got.Key.Equal(pub.Key) {
				t.Fatalf("Unmarshal(%s)=%v, %v", in, got, err)
			}
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		x := seqBase64.EncodeToString(pub.Key)
		for name, in := range map[string]string{
			"NotObject":  `"k1"`,
			"NoKty":      `{"crv":"Ed25519","kid":"k1","x":"` + x + `"}`,
			"RSA":        `{"kty":"RSA","crv":"Ed25519","kid":"k1","x":"` + x + `"}`,
			"X25519":     `{"kty":"OKP","crv":"X25519","kid":"k1","x":"` + x + `"}`,
			"OtherAlg":   `{"kty":"OKP","crv":"Ed25519","alg":"ES256","kid":"k1","x":"` + x + `"}`,
			"NoKid":      `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`,
			"BadKid":     `{"kty":"OKP","crv":"Ed25519","kid":"k 1","x":"` + x + `"}`,
			"NoX":        `{"kty":"OKP","crv":"Ed25519","kid":"k1"}`,
			"ShortX":     `{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + x[:40] + `"}`,
			"PaddedX":    `{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + x + `="}`,
			"StdX":       `{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)) + `"}`,
			"PrivateKey": `{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + x + `","d":"` + seqBase64.EncodeToString(key.Private.Seed()) + `"}`,
		} {
			t.Run(name, func(t *testing.T) {
				var got PublicKey
				if err := json.Unmarshal([]byte(in), &got); err == nil {
					t.Fatalf("Unmarshal(%s)=%v, want error", in, got)
				}
			})
		}
		for _, k := range []PublicKey{{}, {ID: "k1"}, {ID: "k1", Key: make([]byte, 31)}, {ID: "", Key: pub.Key}} {
			if data, err := json.Marshal(k); err == nil {
				t.Fatalf("Marshal(%v)=%s, want error", k, data)
			}
		}
	})
}

// FuzzParseSequencer checks that parsing never panics, that only the
// canonical encoding of a sequencer is accepted, and that what it accepts
// re-signs into a sequencer that verifies with the same content.
func FuzzParseSequencer(f *testing.F) {
	key := testKey(f, "k1", 1)
	for _, s := range []Sequencer{
		testSequencer(),
		{Resource: "r", Holder: "h", Token: 1},
		{Resource: "ユーザー/42", Holder: "pod-7", Token: MaxToken, Expires: time.UnixMilli(1<<63 - 1)},
	} {
		f.Add(mustSign(f, key, s))
	}
	for _, s := range []string{"", ".", "AQ.AA", "AQJrMQUA.", strings.Repeat("A", 100) + "." + strings.Repeat("A", 86)} {
		f.Add(s)
	}
	ks := keySet(key)
	f.Fuzz(func(t *testing.T, s string) {
		seq, payload, sig, err := parseSequencer(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidSequencer) {
				t.Fatalf("err=%v, want ErrInvalidSequencer", err)
			}
			if _, err := ks.Verify(s, "orders", 5); !errors.Is(err, ErrInvalidSequencer) {
				t.Fatalf("Verify err=%v, want ErrInvalidSequencer", err)
			}
			return
		}
		if _, err := ks.Verify(s, seq.Resource, seq.Token); err != nil && !errors.Is(err, ErrInvalidSequencer) {
			t.Fatalf("Verify err=%v", err)
		}
		again, err := seq.appendPayload(nil)
		if err != nil || !bytes.Equal(again, payload) {
			t.Fatalf("re-encoded payload %x, %v; want %x", again, err, payload)
		}
		if enc := seqBase64.EncodeToString(payload) + "." + seqBase64.EncodeToString(sig); enc != s {
			t.Fatalf("re-encoded %q, want %q", enc, s)
		}
		if len(s) > MaxSequencerLen {
			t.Fatalf("accepted %d bytes", len(s))
		}
		k := testKey(t, seq.KeyID, 3)
		signed := mustSign(t, k, seq)
		got, err := keySet(k).Verify(signed, seq.Resource, seq.Token)
		if err != nil || got != seq {
			t.Fatalf("re-signed Verify=%+v, %v; want %+v", got, err, seq)
		}
	})
}
