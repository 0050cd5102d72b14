package nostr

// Sign returns the BIP-340 signature of msg by sk, using libsecp256k1
// (secp256k1_keypair_create + secp256k1_schnorrsig_sign32) where
// DefaultVerifier is libsecp256k1, and btcec otherwise; both produce the same
// bytes.
//
// Sign is deterministic: it uses 32 zero bytes as BIP-340's auxiliary
// randomness, so the same key and message always give the same signature
// and a load run or a test is reproducible byte for byte. BIP-340 allows
// this; the nonce is still derived from the secret key and the message, so
// distinct messages never share a nonce. What is lost is the extra
// protection fresh randomness gives against side-channel and fault attacks
// on the signer, which matters for long-lived keys on shared hardware; such
// callers should use SignAux with 32 bytes from crypto/rand.
//
// It panics if sk is not Valid.
func (sk SecretKey) Sign(msg *[32]byte) Sig {
	var aux [32]byte
	return sk.SignAux(msg, &aux)
}

// SignAux is Sign with explicit BIP-340 auxiliary randomness aux (aux_rand in
// the BIP-340 test vectors). It panics if sk is not Valid.
func (sk SecretKey) SignAux(msg, aux *[32]byte) Sig {
	sk.mustBeValid()
	return defaultBackend().sign(&sk, msg, aux)
}

// SignEvent makes ev a signed event of sk: it sets ev.PubKey, computes ev.ID
// with ComputeID over the event's current pubkey, created_at, kind, tags and
// content, signs the id with sk.Sign (deterministic), and sets ev.Raw to
// Serialize(ev), replacing any earlier Raw. The caller must own ev. It panics
// if sk is not Valid.
func SignEvent(ev *Event, sk SecretKey) {
	ev.PubKey = sk.PubKey()
	ev.ID = ComputeID(ev)
	ev.Sig = sk.Sign((*[32]byte)(&ev.ID))
	ev.Raw = Serialize(ev)
}
