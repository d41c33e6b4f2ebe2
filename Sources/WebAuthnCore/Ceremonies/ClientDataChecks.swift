internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Checks of the client data that registration and authentication share
/// (WebAuthn L3 §7.1 steps 7–11, §7.2 steps 10–14). Each is one spec step.
/// Strings are compared as UTF-8 bytes (`Bytes.sameUTF8`), never with
/// `String ==`, which equates canonically equivalent text (U+212A KELVIN SIGN
/// and `K`) where a browser's serialisation would not.
enum ClientDataChecks {
    /// §7.1 step 7 / §7.2 step 10: C.type is `webauthn.create` / `webauthn.get`.
    static func verifyType(_ c: CollectedClientData, expected: String, step: @autoclosure () -> String) throws(WebAuthnError) {
        guard Bytes.sameUTF8(c.type, expected) else {
            throw WebAuthnError(.clientDataTypeMismatch, "clientData.type is \"\(c.type.prefix(64))\"; expected \"\(expected)\"", step: step())
        }
    }

    /// §7.1 step 8 / §7.2 step 11: C.challenge equals the base64url encoding of the issued challenge.
    static func verifyChallenge(_ c: CollectedClientData, expected: [UInt8], step: @autoclosure () -> String) throws(WebAuthnError) {
        // The string itself: the spec compares C.challenge with the base64url encoding of the
        // challenge, and the decoder also reads padding, `+` and `/`, and spare bits (red team,
        // round 26: each of these passed).
        guard Bytes.constantTimeEqual(Array(c.challenge.utf8), Array(Base64URL.encode(expected).utf8)) else {
            throw WebAuthnError(
                .challengeMismatch, "clientData.challenge is \"\(c.challenge.prefix(128))\"; expected \"\(Base64URL.encode(expected))\"", step: step())
        }
    }

    /// §7.1 step 9 / §7.2 step 12: C.origin is one of the relying party's origins (exact match, byte for byte).
    static func verifyOrigin(_ c: CollectedClientData, rp: RelyingParty, step: @autoclosure () -> String) throws(WebAuthnError) {
        guard rp.origins.contains(where: { Bytes.sameUTF8($0, c.origin) }) else {
            throw WebAuthnError(.originNotAllowed, "clientData.origin is \"\(c.origin.prefix(256))\"; expected one of \(rp.origins)", step: step())
        }
    }

    /// §7.1 step 10 / §7.2 step 13: if C.crossOrigin is true, the relying
    /// party must expect to be embedded in a cross-origin iframe.
    static func verifyCrossOrigin(_ c: CollectedClientData, policy: CrossOriginPolicy, step: @autoclosure () -> String) throws(WebAuthnError) {
        guard c.crossOrigin == true else { return }
        guard policy != .deny else {
            throw WebAuthnError(
                .crossOriginNotAllowed, "clientData.crossOrigin is true but cross-origin ceremonies are not allowed (CrossOriginPolicy.deny)", step: step())
        }
    }

    /// §7.1 step 11 / §7.2 step 14: if C.topOrigin is present, it must be a
    /// top-level origin the relying party expects to be framed by.
    static func verifyTopOrigin(_ c: CollectedClientData, policy: CrossOriginPolicy, step: @autoclosure () -> String) throws(WebAuthnError) {
        switch policy {
        case .deny:
            if let top = c.topOrigin {
                throw WebAuthnError(
                    .topOriginNotAllowed, "clientData.topOrigin is \"\(top.prefix(256))\" but cross-origin ceremonies are not allowed", step: step())
            }
        case .allowAnyTopOrigin:
            return
        case .allowTopOrigins(let allowed):
            guard c.crossOrigin == true || c.topOrigin != nil else { return }
            guard let top = c.topOrigin else {
                throw WebAuthnError(.topOriginNotAllowed, "a cross-origin response without clientData.topOrigin; expected one of \(allowed)", step: step())
            }
            guard allowed.contains(where: { Bytes.sameUTF8($0, top) }) else {
                throw WebAuthnError(.topOriginNotAllowed, "clientData.topOrigin is \"\(top.prefix(256))\"; expected one of \(allowed)", step: step())
            }
        }
    }
}

/// Checks of authenticator data that both ceremonies share.
enum AuthenticatorDataChecks {
    /// §7.1 step 14 / §7.2 step 15: rpIdHash is SHA-256 of the RP ID.
    static func verifyRpIdHash(_ authData: AuthenticatorData, rp: RelyingParty, step: @autoclosure () -> String) throws(WebAuthnError) {
        guard Bytes.constantTimeEqual(authData.rpIdHash, rp.rpIdHash) else {
            throw WebAuthnError(
                .rpIdHashMismatch, "rpIdHash is \(Bytes.hex(authData.rpIdHash)); expected SHA-256(\"\(rp.id)\") = \(Bytes.hex(rp.rpIdHash))", step: step())
        }
    }

    /// §7.1 step 15 / §7.2 step 16: UP is set. Only a registration whose
    /// options the relying party issued for a conditional create may omit it
    /// (`conditionalCreate`, read from the pending ceremony, never from the
    /// response); authentication passes `false` always.
    static func verifyUserPresent(_ authData: AuthenticatorData, conditionalCreate: Bool, step: @autoclosure () -> String) throws(WebAuthnError) {
        guard conditionalCreate || authData.userPresent else {
            throw WebAuthnError(
                .userPresenceMissing, "the User Present (UP) flag is not set; flags are 0x\(String(authData.flags.rawValue, radix: 16))", step: step())
        }
    }

    /// §7.1 step 16 / §7.2 step 17: UV is set when user verification is required.
    static func verifyUserVerified(_ authData: AuthenticatorData, requirement: UserVerificationRequirement, step: @autoclosure () -> String)
        throws(WebAuthnError)
    {
        guard requirement != .required || authData.userVerified else {
            throw WebAuthnError(.userVerificationMissing, "user verification is required but the User Verified (UV) flag is not set", step: step())
        }
    }

    /// §7.1 step 17 / §7.2 step 18: if BE is not set, BS must not be set.
    static func verifyBackupFlags(_ authData: AuthenticatorData, step: @autoclosure () -> String) throws(WebAuthnError) {
        guard authData.backupEligible || !authData.backedUp else {
            throw WebAuthnError(.backupStateInvalid, "the Backup State (BS) flag is set without Backup Eligible (BE)", step: step())
        }
    }
}
