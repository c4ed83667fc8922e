"""Sequencers: the pure-Python parser, offline verification with the
'cryptography' package, every vector of testdata/sequencer/vectors.json,
and the sequencers of a real server run with --signing-key."""

from __future__ import annotations

import json
import os
import unittest
from unittest import mock

import fence
import fence.sequencer as fseq

from .fenceserver import REPO, FenceServer, keygen

VECTORS = REPO / "testdata" / "sequencer" / "vectors.json"
NEEDS_ED25519 = "the 'cryptography' package is not installed, so Ed25519 signatures cannot be checked (pip install cryptography)"


def load_vectors() -> dict:
    with open(str(VECTORS), encoding="utf-8") as f:
        return json.load(f)


@unittest.skipUnless(VECTORS.is_file(), "%s is missing" % VECTORS)
class VectorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.v = load_vectors()
        cls.keys = fence.key_set([k["jwk"] for k in cls.v["keys"]])

    def test_file(self) -> None:
        v = self.v
        self.assertEqual(v["format"], "fence sequencer v1 test vectors")
        names = [x["name"] for part in ("valid", "invalid", "mismatch") for x in v[part]]
        self.assertEqual(len(names), len(set(names)))
        self.assertTrue(v["valid"] and v["invalid"] and v["mismatch"])

    def test_keys(self) -> None:
        for k in self.v["keys"]:
            with self.subTest(kid=k["kid"]):
                pk = fence.PublicKey.from_jwk(k["jwk"])
                self.assertEqual(pk.kid, k["kid"])
                self.assertEqual(pk.key.hex(), k["public_key_hex"])
                self.assertEqual(pk.to_jwk(), k["jwk"])
                self.assertEqual(self.keys[k["kid"]], bytes.fromhex(k["public_key_hex"]))
        # The answer of GET /v1/keys works as a key set too.
        self.assertEqual(fence.key_set({"keys": [k["jwk"] for k in self.v["keys"]]}), self.keys)

    def test_valid_parse(self) -> None:
        for x in self.v["valid"]:
            with self.subTest(x["name"]):
                s = fence.parse_sequencer(x["sequencer"])
                self.assertEqual(s.kid, x["kid"])
                self.assertEqual(s.token, int(x["token"]))
                self.assertEqual(s.expires_ms, int(x["expires_ms"]))
                self.assertEqual(s.resource, x["resource"])
                self.assertEqual(s.holder, x["holder"])
                self.assertEqual(s.payload.hex(), x["payload_hex"])
                self.assertEqual(s.signature.hex(), x["signature_hex"])
                if s.expires_ms and s.expires_ms < 253402300800000:  # before year 10000
                    self.assertEqual(int(s.expires.timestamp() * 1000), s.expires_ms)

    @unittest.skipUnless(fence.HAVE_CRYPTOGRAPHY, NEEDS_ED25519)
    def test_valid_verify(self) -> None:
        for x in self.v["valid"]:
            with self.subTest(x["name"]):
                s = fence.verify_sequencer(self.keys, x["sequencer"], x["resource"], int(x["token"]))
                self.assertEqual((s.resource, s.token, s.holder), (x["resource"], int(x["token"]), x["holder"]))

    def test_invalid_parse_stage(self) -> None:
        n = 0
        for x in self.v["invalid"]:
            if x["stage"] != "parse":
                continue
            n += 1
            with self.subTest(x["name"], reason=x["reason"]):
                with self.assertRaises(fence.InvalidSequencerError) as cm:
                    fence.parse_sequencer(x["sequencer"])
                self.assertEqual(cm.exception.reason, "malformed")
                self.assertIsNone(cm.exception.status)
                # Verifying fails the same way, with or without Ed25519.
                with self.assertRaises(fence.InvalidSequencerError):
                    fence.verify_sequencer(self.keys, x["sequencer"], "orders", 5)
        self.assertGreater(n, 50)

    def test_invalid_verify_stage_parses(self) -> None:
        for x in self.v["invalid"]:
            if x["stage"] == "verify":
                with self.subTest(x["name"]):
                    fence.parse_sequencer(x["sequencer"])

    @unittest.skipUnless(fence.HAVE_CRYPTOGRAPHY, NEEDS_ED25519)
    def test_invalid_verify_stage(self) -> None:
        for x in self.v["invalid"]:
            if x["stage"] != "verify":
                continue
            with self.subTest(x["name"], reason=x["reason"]):
                s = fence.parse_sequencer(x["sequencer"])
                with self.assertRaises(fence.InvalidSequencerError) as cm:
                    fence.verify_sequencer(self.keys, x["sequencer"], s.resource, s.token)
                self.assertIn(cm.exception.reason, ("unknown key id", "bad signature"))

    @unittest.skipUnless(fence.HAVE_CRYPTOGRAPHY, NEEDS_ED25519)
    def test_mismatch(self) -> None:
        for x in self.v["mismatch"]:
            with self.subTest(x["name"]):
                s = fence.parse_sequencer(x["sequencer"])
                fence.verify_sequencer(self.keys, x["sequencer"], s.resource, s.token)
                with self.assertRaises(fence.InvalidSequencerError) as cm:
                    fence.verify_sequencer(self.keys, x["sequencer"], x["resource"], int(x["token"]))
                self.assertIn(cm.exception.reason, ("wrong resource", "wrong token"))

    def test_without_cryptography(self) -> None:
        x = self.v["valid"][0]
        with mock.patch.object(fseq, "HAVE_CRYPTOGRAPHY", False):
            with self.assertRaises(ImportError) as cm:
                fence.verify_sequencer(self.keys, x["sequencer"], x["resource"], int(x["token"]))
            self.assertIn("pip install cryptography", str(cm.exception))
            # The checks before the signature still run.
            with self.assertRaises(fence.InvalidSequencerError) as cm2:
                fence.verify_sequencer({}, x["sequencer"], x["resource"], int(x["token"]))
            self.assertEqual(cm2.exception.reason, "unknown key id")


class JWKTest(unittest.TestCase):
    GOOD = {"kty": "OKP", "crv": "Ed25519", "alg": "Ed25519", "kid": "k1", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}

    def test_strict(self) -> None:
        fence.PublicKey.from_jwk(self.GOOD)
        for alg in (None, "EdDSA"):
            j = dict(self.GOOD)
            if alg is None:
                del j["alg"]
            else:
                j["alg"] = alg
            fence.PublicKey.from_jwk(j)
        bad = [
            {"kty": "EC"},
            {"crv": "X25519"},
            {"alg": "ES256"},
            {"kid": ""},
            {"kid": "a.b"},
            {"kid": "k" * 65},
            {"x": self.GOOD["x"] + "="},
            {"x": self.GOOD["x"][:-1]},
            {"x": self.GOOD["x"][:-1] + "p"},  # non-zero padding bits
            {"x": self.GOOD["x"].replace("_", "/")},
            {"d": "secret"},
        ]
        for change in bad:
            with self.subTest(change=change):
                j = dict(self.GOOD)
                j.update(change)
                with self.assertRaises(ValueError):
                    fence.PublicKey.from_jwk(j)


class SignedServerTest(unittest.TestCase):
    """A server run with --signing-key signs every grant."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        key = os.path.join(cls.server.dir, "signing.key")
        keygen(key)
        cls.server.restart("--signing-key", key)
        cls.client = fence.Client(cls.server.addr)


    def test_lease_sequencer(self) -> None:
        keys = self.client.keys()
        self.assertEqual(len(keys), 1)
        with self.client.lock("signed/orders", ttl=5, holder="worker-a") as lease:
            self.assertTrue(lease.sequencer)
            s = fence.parse_sequencer(lease.sequencer)
            self.assertEqual((s.kid, s.resource, s.holder, s.token), (keys[0].kid, "signed/orders", "worker-a", lease.token))
            self.assertGreater(s.expires_ms, 0)
            h = lease.stamp()
            self.assertEqual(h, {"Fencing-Token": str(lease.token), "Fence-Sequencer": lease.sequencer})
            lease.put("k", b"v")  # carries the sequencer; the server itself does not check it
            renewed = self.client.renew("signed/orders", lease.token)
            self.assertEqual(renewed.sequencer, lease.sequencer)

    @unittest.skipUnless(fence.HAVE_CRYPTOGRAPHY, NEEDS_ED25519)
    def test_verify_lease_sequencer(self) -> None:
        keys = self.client.keys()
        with self.client.lock("signed/verify", ttl=5) as lease:
            s = fence.verify_sequencer(keys, lease.sequencer, "signed/verify", lease.token)
            self.assertEqual(s.holder, lease.holder)
            with self.assertRaises(fence.InvalidSequencerError) as cm:
                fence.verify_sequencer(keys, lease.sequencer, "signed/verify", lease.token + 1)
            self.assertEqual(cm.exception.reason, "wrong token")
            with self.assertRaises(fence.InvalidSequencerError) as cm:
                fence.verify_sequencer(keys, lease.sequencer, "signed/other", lease.token)
            self.assertEqual(cm.exception.reason, "wrong resource")
            with self.assertRaises(fence.InvalidSequencerError) as cm:
                fence.verify_sequencer({}, lease.sequencer, "signed/verify", lease.token)
            self.assertEqual(cm.exception.reason, "unknown key id")

    @unittest.skipUnless(fence.HAVE_CRYPTOGRAPHY, NEEDS_ED25519)
    def test_forged_sequencer(self) -> None:
        keys = self.client.keys()
        info = self.client.acquire_raw("signed/forged", "a", ttl=5)
        p64, sig64 = info.sequencer.split(".")
        flipped = sig64[:10] + ("A" if sig64[10] != "A" else "B") + sig64[11:]
        with self.assertRaises(fence.InvalidSequencerError) as cm:
            fence.verify_sequencer(keys, p64 + "." + flipped, "signed/forged", info.token)
        self.assertEqual(cm.exception.reason, "bad signature")


if __name__ == "__main__":
    unittest.main()
