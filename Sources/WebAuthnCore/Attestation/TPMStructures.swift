internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// TPM 2.0 structures (TCG TPM 2.0 Library, Part 2) as the `tpm` format uses
/// them, parsed strictly: big-endian, sized buffers bounded, no bytes left over.
package enum TPM {
    /// TPM_GENERATED_VALUE, the magic of every TPMS_ATTEST the TPM made (Part 2 §6.2).
    package static let generatedValue: UInt32 = 0xff54_4347
    /// TPM_ST_ATTEST_CERTIFY, the TPMS_ATTEST type of TPM2_Certify (Part 2 §6.9).
    package static let stAttestCertify: UInt16 = 0x8017
    /// TPM_ALG_ID values (Part 2 §6.3).
    package enum Alg {
        package static let rsa: UInt16 = 0x0001, sha1: UInt16 = 0x0004, sha256: UInt16 = 0x000B, sha384: UInt16 = 0x000C,
            sha512: UInt16 = 0x000D, null: UInt16 = 0x0010, ecc: UInt16 = 0x0023
    }
    /// TPM_ECC_CURVE values of the NIST curves (Part 2 §6.4).
    package enum ECCCurve {
        package static let nistP256: UInt16 = 0x0003, nistP384: UInt16 = 0x0004, nistP521: UInt16 = 0x0005
    }
    /// TPMA_OBJECT bits (Part 2 §8.3.2) a credential key made in the TPM carries: it cannot be
    /// duplicated (`fixedTPM`, `fixedParent`), the TPM generated its secret (`sensitiveDataOrigin`),
    /// and it signs (`sign`).
    package enum ObjectAttribute {
        package static let fixedTPM: UInt32 = 1 << 1, fixedParent: UInt32 = 1 << 4, sensitiveDataOrigin: UInt32 = 1 << 5, sign: UInt32 = 1 << 18
        /// Each bit with its name, in TPMA_OBJECT's order.
        static let resident: [(bit: UInt32, name: String)] = [
            (fixedTPM, "fixedTPM"), (fixedParent, "fixedParent"), (sensitiveDataOrigin, "sensitiveDataOrigin"), (sign, "sign"),
        ]
    }
    /// The NIST curves by TPM_ECC_CURVE.
    static let curves: [UInt16: ECCurve] = [ECCCurve.nistP256: .p256, ECCCurve.nistP384: .p384, ECCCurve.nistP521: .p521]
    /// Bytes of TPMS_CLOCK_INFO: clock (8), resetCount (4), restartCount (4), safe (1).
    package static let clockInfoSize = 17
    /// Largest structure accepted (a TPMT_PUBLIC or TPMS_ATTEST is well under 1 KiB).
    static let maxSize = 4096

    static func digest(forNameAlg alg: UInt16) -> DigestAlgorithm? {
        switch alg {
        case Alg.sha1: return .sha1
        case Alg.sha256: return .sha256
        case Alg.sha384: return .sha384
        case Alg.sha512: return .sha512
        default: return nil
        }
    }

    static func error(_ message: String) -> WebAuthnError {
        WebAuthnError(.attestationStatementMalformed, "TPM structure: \(message)", step: TPMAttestation.step)
    }

    /// A big-endian reader over a TPM structure.
    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func u8() throws(WebAuthnError) -> UInt8 { Array(try take(1))[0] }
        mutating func u16() throws(WebAuthnError) -> UInt16 { let b = try take(2); return UInt16(b[b.startIndex]) << 8 | UInt16(b[b.startIndex + 1]) }
        mutating func u32() throws(WebAuthnError) -> UInt32 { try take(4).reduce(0) { $0 << 8 | UInt32($1) } }
        mutating func u64() throws(WebAuthnError) -> UInt64 { try take(8).reduce(0) { $0 << 8 | UInt64($1) } }
        /// A TPM2B: a 16-bit size and that many bytes.
        mutating func sized() throws(WebAuthnError) -> [UInt8] { Array(try take(Int(try u16()))) }

        mutating func take(_ n: Int) throws(WebAuthnError) -> ArraySlice<UInt8> {
            guard n <= bytes.count - offset else { throw TPM.error("truncated at byte \(offset)") }
            defer { offset += n }
            return bytes[offset..<offset + n]
        }

        func finish() throws(WebAuthnError) {
            guard offset == bytes.count else { throw TPM.error("\(bytes.count - offset) bytes left over") }
        }
    }

    /// TPMT_PUBLIC (Part 2 §12.2.4).
    struct Public {
        enum Key {
            case rsa(modulus: [UInt8], exponent: UInt32)
            case ecc(curve: UInt16, x: [UInt8], y: [UInt8])
        }
        let type: UInt16
        let nameAlg: UInt16
        /// TPMA_OBJECT (Part 2 §8.3).
        let objectAttributes: UInt32
        let key: Key

        init(_ bytes: [UInt8]) throws(WebAuthnError) {
            guard bytes.count <= TPM.maxSize else { throw TPM.error("pubArea is \(bytes.count) bytes") }
            var r = Reader(bytes)
            type = try r.u16()
            nameAlg = try r.u16()
            objectAttributes = try r.u32()
            _ = try r.sized()  // authPolicy
            // parameters: symmetric (TPMT_SYM_DEF_OBJECT), then the scheme.
            if try r.u16() != Alg.null { _ = try r.u16(); _ = try r.u16() }
            if try r.u16() != Alg.null { _ = try r.u16() }
            switch type {
            case Alg.rsa:
                _ = try r.u16()  // keyBits
                let exponent = try r.u32()
                key = .rsa(modulus: try r.sized(), exponent: exponent == 0 ? 65537 : exponent)
            case Alg.ecc:
                let curve = try r.u16()
                if try r.u16() != Alg.null { _ = try r.u16() }  // kdf
                key = .ecc(curve: curve, x: try r.sized(), y: try r.sized())
            default:
                throw TPM.error("pubArea type 0x\(String(type, radix: 16)) is neither RSA nor ECC")
            }
            try r.finish()
        }
    }

    /// TPMS_ATTEST with TPMS_CERTIFY_INFO (Part 2 §10.12.8, §10.12.3).
    struct Attest {
        let magic: UInt32
        let type: UInt16
        let extraData: [UInt8]
        let attestedName: [UInt8]

        init(_ bytes: [UInt8]) throws(WebAuthnError) {
            guard bytes.count <= TPM.maxSize else { throw TPM.error("certInfo is \(bytes.count) bytes") }
            var r = Reader(bytes)
            magic = try r.u32()
            type = try r.u16()
            _ = try r.sized()  // qualifiedSigner
            extraData = try r.sized()
            _ = try r.take(TPM.clockInfoSize)  // clockInfo
            _ = try r.u64()  // firmwareVersion
            attestedName = try r.sized()
            _ = try r.sized()  // qualifiedName
            try r.finish()
        }
    }
}
